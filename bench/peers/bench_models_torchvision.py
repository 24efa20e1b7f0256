#!/usr/bin/python3
# Implements: the torchvision peer of bench/bench_models.cpp: times torchvision 0.14's
# retinanet_resnet50_fpn (built as with a pretrained backbone: FrozenBatchNorm2d, 3 trainable
# layers, P6 from P5) at 320x320 without resizing (min_size = max_size = 320):
#   train_step_s  : batch 2 forward + loss + backward + SGD step (momentum 0.9)
#   infer_s       : batch 1 full inference (transform, network, postprocess) at score threshold 0
#   network_fwd_s : batch 1 backbone + FPN + head only (what detseg's network covers)
# Each time is [wall s, process CPU s] per call. Prints one JSON line.  Usage: bench_models_torchvision.py THREADS ITERS
import json
import resource
import sys
import time

import torch
import torchvision
from torchvision.models.detection import RetinaNet
from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
from torchvision.ops import misc as misc_nn_ops
from torchvision.ops.feature_pyramid_network import LastLevelP6P7


def timed(fn, iters):
    """[wall seconds, process CPU seconds] per call."""
    fn()  # warm-up
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(iters):
        fn()
    return [(time.perf_counter() - start) / iters, (time.process_time() - cpu) / iters]


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    body = torchvision.models.resnet50(weights=None, norm_layer=misc_nn_ops.FrozenBatchNorm2d)
    backbone = _resnet_fpn_extractor(body, 3, returned_layers=[2, 3, 4],
                                     extra_blocks=LastLevelP6P7(256, 256))
    model = RetinaNet(backbone, num_classes=91, min_size=320, max_size=320, score_thresh=0.0)
    images = [torch.rand(3, 320, 320) for _ in range(2)]
    targets = [{"boxes": torch.tensor([[20.0, 30.0, 120.0, 160.0], [150.0, 40.0, 300.0, 300.0]]),
                "labels": torch.tensor([1, 5])} for _ in range(2)]
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.001,
                          momentum=0.9)

    def train_step():
        losses = model(images, targets)
        loss = sum(losses.values())
        opt.zero_grad()
        loss.backward()
        opt.step()

    model.train()
    train_s = timed(train_step, iters)
    model.eval()
    with torch.no_grad():
        infer_s = timed(lambda: model([images[0]]), iters)
        x = torch.rand(1, 3, 320, 320)
        net_s = timed(lambda: model.head(list(model.backbone(x).values())), iters)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"train_step_s": train_s, "infer_s": infer_s, "network_fwd_s": net_s,
                      "peak_rss_mb": peak_mb, "threads": threads, "iters": iters}))


if __name__ == "__main__":
    main()
