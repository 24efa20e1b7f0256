#!/usr/bin/python3
# Implements: the torchvision peer of bench/bench_two_stage.cpp: times torchvision 0.14's
# fasterrcnn_resnet50_fpn and maskrcnn_resnet50_fpn (built as with a pretrained backbone:
# FrozenBatchNorm2d, 3 trainable layers; 91 classes) at 320x320 without resizing
# (min_size = max_size = 320):
#   <model>_train_step_s : batch 2 forward + losses + backward + SGD step (momentum 0.9)
#   <model>_infer_s      : batch 1 full inference (transform, network, postprocess) at score threshold 0
#   <model>_peak_rss_mb  : peak RSS of the process after that model (models run in that order)
# Each time is [wall s, process CPU s] per call. Prints one JSON line.
# Usage: bench_two_stage_torchvision.py THREADS ITERS
import json
import resource
import sys
import time

import torch
import torchvision
from torchvision.models.detection import FasterRCNN, MaskRCNN
from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
from torchvision.ops import misc as misc_nn_ops


def timed(fn, iters):
    """[wall seconds, process CPU seconds] per call."""
    fn()  # warm-up
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(iters):
        fn()
    return [(time.perf_counter() - start) / iters, (time.process_time() - cpu) / iters]


def bench(name, cls, iters, out):
    torch.manual_seed(0)
    body = torchvision.models.resnet50(weights=None, norm_layer=misc_nn_ops.FrozenBatchNorm2d)
    backbone = _resnet_fpn_extractor(body, 3)
    model = cls(backbone, num_classes=91, min_size=320, max_size=320, box_score_thresh=0.0)
    images = [torch.rand(3, 320, 320) for _ in range(2)]
    boxes = torch.tensor([[20.0, 30.0, 120.0, 160.0], [150.0, 40.0, 300.0, 300.0]])
    masks = torch.zeros(2, 320, 320, dtype=torch.uint8)
    masks[0, 40:150, 30:110] = 1
    masks[1, 60:280, 170:290] = 1
    targets = [{"boxes": boxes, "labels": torch.tensor([1, 5]), "masks": masks} for _ in range(2)]
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.001, momentum=0.9)

    def train_step():
        loss = sum(model(images, targets).values())
        opt.zero_grad()
        loss.backward()
        opt.step()

    model.train()
    out[name + "_train_step_s"] = timed(train_step, iters)
    model.eval()
    with torch.no_grad():
        out[name + "_infer_s"] = timed(lambda: model([images[0]]), iters)
    out[name + "_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    torch.set_num_threads(threads)
    # After two SGD steps torchvision's Faster R-CNN carries denormal floats, and its step goes
    # from 2.7 s to 14-29 s (aten::mm and roi_align_backward crawl through them; measured
    # 2026-12-05 on a 2-core x86-64 machine, CPU model not recorded).
    # Flushing them to zero keeps the comparison about kernels, in the peer's favour.
    torch.set_flush_denormal(True)
    out = {"threads": threads, "iters": iters, "flush_denormal": True}
    bench("faster_rcnn", FasterRCNN, iters, out)
    bench("mask_rcnn", MaskRCNN, iters, out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
