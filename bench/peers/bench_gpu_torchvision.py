#!/usr/bin/python3
# Implements: the torchvision peer of bench/bench_gpu.cpp, measured the same way on the same device:
# retinanet / fasterrcnn / maskrcnn _resnet50_fpn (built as with a pretrained backbone:
# FrozenBatchNorm2d, 3 trainable layers; 91 classes) on SIZE x SIZE images without resizing
# (min_size = max_size = SIZE), and deeplabv3_resnet50 (21 classes, no aux head, trainable batch
# norm, output stride 8) on SEG x SEG; batch BATCH; fp32 and bf16 autocast.
#   train: forward + losses + backward + SGD step (momentum 0.9); infer: the full model call
#   (transform, network, postprocess at score threshold 0.05). ms per call after two warm-ups,
#   images/s, and torch.cuda.max_memory_allocated of each phase in MiB.
# Prints one JSON object (the keys bench_gpu prints).
# Usage: bench_gpu_torchvision.py [--device cuda] [--size 1024] [--seg-size 512] [--batch 8] [--iters 8]
#                                 [--models retinanet,faster_rcnn,mask_rcnn,deeplabv3] [--precisions fp32,bf16]
import argparse
import json
import sys
import time

import torch
import torchvision
from torchvision.models.detection import FasterRCNN, MaskRCNN, RetinaNet
from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
from torchvision.models.segmentation import deeplabv3_resnet50
from torchvision.ops import misc as misc_nn_ops
from torchvision.ops.feature_pyramid_network import LastLevelP6P7


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_ms(fn, iters, device):
    """ms per call after two warm-ups; the peak memory counter restarts after them (cuDNN's
    benchmark-mode algorithm search tries huge workspaces on the first calls)."""
    fn()
    fn()
    synchronize(device)
    reset_peak(device)
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    synchronize(device)
    return (time.perf_counter() - start) * 1000.0 / iters


def peak_mb(device):
    return torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else 0.0


def reset_peak(device):
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def profile_kernels(fn, steps, device):
    """bench_gpu's profile_kernels: the 25 largest GPU kernels (ms per step, calls per step)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn()
        synchronize(device)
    kernels = {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        k = kernels.setdefault(e.name[:140], [0.0, 0])
        k[0] += e.device_time / 1000.0 / steps
        k[1] += 1
    top = sorted(kernels.items(), key=lambda kv: -kv[1][0])[:25]
    return {"kernel_ms_per_step": sum(k[0] for k in kernels.values()),
            "kernels_per_step": sum(k[1] for k in kernels.values()) // steps,
            "top": [[name, k[0], k[1] // steps] for name, k in top]}


def build(name, size):
    torch.manual_seed(0)
    if name == "deeplabv3":
        return deeplabv3_resnet50(weights=None, weights_backbone=None, num_classes=21, aux_loss=False)
    body = torchvision.models.resnet50(weights=None, norm_layer=misc_nn_ops.FrozenBatchNorm2d)
    if name == "retinanet":
        backbone = _resnet_fpn_extractor(body, 3, returned_layers=[2, 3, 4], extra_blocks=LastLevelP6P7(256, 256))
        return RetinaNet(backbone, num_classes=91, min_size=size, max_size=size, score_thresh=0.05)
    cls = MaskRCNN if name == "mask_rcnn" else FasterRCNN
    return cls(_resnet_fpn_extractor(body, 3), num_classes=91, min_size=size, max_size=size, box_score_thresh=0.05)


def bench(name, precision, args, device):
    seg = name == "deeplabv3"
    size = args.seg_size if seg else args.size
    model = build(name, size).to(device)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.001, momentum=0.9)
    dtype = torch.bfloat16 if precision == "bf16" else None
    images = torch.rand(args.batch, 3, size, size, device=device)
    s = size / 320.0
    boxes = torch.tensor([[20.0, 30.0, 120.0, 160.0], [150.0, 40.0, 300.0, 300.0], [60.0, 200.0, 140.0, 310.0]]) * s
    masks = torch.zeros(3, size, size, dtype=torch.uint8)
    for k, b in enumerate((boxes + 0.5).long().tolist()):
        masks[k, b[1]:b[3], b[0]:b[2]] = 1
    targets = [{"boxes": boxes.to(device), "labels": torch.tensor([1, 5, 18], device=device),
                "masks": masks.to(device)} for _ in range(args.batch)]
    labels = torch.randint(0, 21, (args.batch, size, size), device=device)
    image_list = list(images)

    def forward_loss():
        if seg:
            out = model(images)["out"]
            return torch.nn.functional.cross_entropy(out.float(), labels, ignore_index=255)
        return sum(model(image_list, targets).values())

    def train_step():
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = forward_loss()
        opt.zero_grad()
        loss.backward()
        opt.step()

    def infer():
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            model(images) if seg else model(image_list)

    out = {}
    model.train()
    out["train_ms"] = time_ms(train_step, args.iters, device)
    out["train_img_s"] = 1000.0 * args.batch / out["train_ms"]
    out["train_peak_mb"] = peak_mb(device)
    if precision == "fp32" and name in args.profile.split(",") and device.type == "cuda":
        out["train_profile"] = profile_kernels(train_step, 2, device)
    opt.zero_grad(set_to_none=True)
    model.eval()
    with torch.no_grad():
        out["infer_ms"] = time_ms(infer, args.iters, device)
    out["infer_img_s"] = 1000.0 * args.batch / out["infer_ms"]
    out["infer_peak_mb"] = peak_mb(device)
    print(f"torchvision: {name} {precision} train {out['train_ms']:.1f} ms, inference {out['infer_ms']:.1f} ms",
          file=sys.stderr)
    return out


def bench_ops(args, device):
    """The inputs' sizes of bench_gpu's bench_ops, through torchvision.ops."""
    torch.manual_seed(0)
    n = 20000
    xy, wh = torch.rand(n, 2) * 1000, torch.rand(n, 2) * 100 + 1
    boxes, scores = torch.cat([xy, xy + wh], 1).to(device), torch.rand(n).to(device)
    out = {"nms_20000_ms": time_ms(lambda: torchvision.ops.nms(boxes, scores, 0.5), args.iters * 4, device)}
    features = torch.randn(8, 256, 128, 128).to(device).requires_grad_(True)
    rois = torch.cat([torch.randint(0, 8, (2000, 1)).float(), torch.cat([xy, xy + wh], 1)[:2000] / 2], 1).to(device)
    align = lambda: torchvision.ops.roi_align(features, rois, (7, 7), 0.25, 2, True)
    with torch.no_grad():
        out["roi_align_2000_forward_ms"] = time_ms(align, args.iters * 4, device)
    out["roi_align_2000_forward_backward_ms"] = time_ms(lambda: align().sum().backward(), args.iters * 4, device)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--seg-size", type=int, default=512)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--iters", type=int, default=8)
    p.add_argument("--models", default="retinanet,faster_rcnn,mask_rcnn,deeplabv3")
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--profile", default="")
    args = p.parse_args()
    device = torch.device(args.device)
    torch.backends.cudnn.benchmark = True
    out = {"framework": "torchvision " + torchvision.__version__, "device": str(device), "size": args.size,
           "seg_size": args.seg_size, "batch": args.batch, "iters": args.iters, "results": {}}
    for name in args.models.split(","):
        for precision in args.precisions.split(","):
            try:
                out["results"].setdefault(name, {})[precision] = bench(name, precision, args, device)
            except Exception as e:  # one model failing (out of memory, say) leaves the others
                out["results"].setdefault(name, {})[precision] = {"error": str(e).splitlines()[0]}
                print(f"torchvision: {name} {precision} failed: {e}", file=sys.stderr)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    out["ops"] = bench_ops(args, device)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
