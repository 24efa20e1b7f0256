#!/usr/bin/python3
# Implements: the torchvision peer of bench/bench_seg.cpp: times torchvision 0.14's
# deeplabv3_resnet50 (21 classes, no aux head, trainable batch norm) at 256x256:
#   train_step_s : batch 2 forward + cross-entropy (ignore_index 255) + backward + SGD step
#   infer_s      : batch 1 forward + argmax to a full-resolution label map
#   *_frozen_s   : the same with the backbone built with FrozenBatchNorm2d (DeepLab small-batch)
# Each time is [wall s, process CPU s] per call. Prints one JSON line.
# Usage: bench_seg_torchvision.py THREADS ITERS [--inference-only]  (train times then [0, 0])
import json
import resource
import sys
import time

import torch
import torch.nn.functional as F
from torchvision.models import resnet50
from torchvision.models._utils import IntermediateLayerGetter
from torchvision.models.segmentation import deeplabv3_resnet50
from torchvision.models.segmentation.deeplabv3 import DeepLabHead, DeepLabV3
from torchvision.ops.misc import FrozenBatchNorm2d


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
    train = "--inference-only" not in sys.argv[3:]
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    trainable_bn = deeplabv3_resnet50(weights=None, weights_backbone=None, num_classes=21, aux_loss=False)
    # DeepLab's small-batch setting: the backbone's batch norm frozen (torchvision's
    # FrozenBatchNorm2d), the head's trained.
    body = resnet50(weights=None, replace_stride_with_dilation=[False, True, True], norm_layer=FrozenBatchNorm2d)
    frozen_bn = DeepLabV3(IntermediateLayerGetter(body, return_layers={"layer4": "out"}), DeepLabHead(2048, 21), None)
    images = torch.rand(2, 3, 256, 256)
    labels = torch.randint(0, 21, (2, 256, 256))
    labels[:, :16] = 255
    x = torch.rand(1, 3, 256, 256)

    def times(model):
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.001, momentum=0.9)

        def train_step():
            out = model(images)["out"]
            loss = F.cross_entropy(out, labels, ignore_index=255)
            opt.zero_grad()
            loss.backward()
            opt.step()

        model.train()
        train_s = timed(train_step, iters) if train else [0.0, 0.0]
        model.eval()
        with torch.no_grad():
            infer_s = timed(lambda: model(x)["out"].argmax(1), iters)
        return train_s, infer_s

    train_s, infer_s = times(trainable_bn)
    train_frozen_s, infer_frozen_s = times(frozen_bn)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"train_step_s": train_s, "infer_s": infer_s, "train_step_frozen_s": train_frozen_s,
                      "infer_frozen_s": infer_frozen_s, "peak_rss_mb": peak_mb, "threads": threads,
                      "iters": iters}))


if __name__ == "__main__":
    main()
