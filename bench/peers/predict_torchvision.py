#!/usr/bin/env python3
# Implements: the torchvision peer of bench/bench_predict.sh: torchvision 0.26's RetinaNet built
# as detseg's config builds its own (bench/peers/bench_models_torchvision.py's way: ResNet body,
# FPN on C3-C5 with P6/P7 from P5, RetinaNetHead with GroupNorm when detseg's head has it), with
# detseg's anchors (anchor_scale x stride, 3 scales an octave apart, 3 aspect ratios), resize
# limits, normalisation and postprocessing limits, run over a folder of images:
#   decode torchvision.io.decode_image; then model([image]) under inference_mode (torchvision's
#   transform resizes and normalises, the head runs, postprocess_detections decodes and runs NMS).
# The weights are detseg's when --weights names a `detseg export --format safetensors` file of the
# same architecture (the GroupNorm head's conv biases left out: torchvision's convs there have none),
# else the model keeps its random initialisation; the line says which. The time does not depend on
# them beyond how many candidates pass the score threshold.
# Prints one JSON line: images, seconds of the loop (after one warm-up image), images_per_s.
# Usage: predict_torchvision.py --depth 18|50 --images DIR [--fpn-channels 64] [--group-norm]
#        [--threads 2] [--min-size 256] [--max-size 352] [--anchor-scale 3] [--weights F.safetensors]
import argparse
import json
import os
import struct
import sys
import time
from functools import partial

import torch
import torchvision
from torch import nn
from torchvision.models.detection import RetinaNet
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.backbone_utils import BackboneWithFPN
from torchvision.models.detection.retinanet import RetinaNetHead
from torchvision.ops.feature_pyramid_network import LastLevelP6P7

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64}


def read_safetensors(path):
    """The tensors of a safetensors file (parsed by hand: the venv has no safetensors package)."""
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(body[begin:end]), dtype=DTYPES[info["dtype"]]) if end > begin else \
            torch.empty(0, dtype=DTYPES[info["dtype"]])
        tensors[name] = t.reshape(info["shape"]).clone()
    return tensors


def build(args):
    body = getattr(torchvision.models, "resnet%d" % args.depth)(weights=None)
    channels = [128, 256, 512] if args.depth < 50 else [512, 1024, 2048]
    c = args.fpn_channels
    backbone = BackboneWithFPN(body, {"layer2": "0", "layer3": "1", "layer4": "2"}, channels, c,
                               extra_blocks=LastLevelP6P7(c, c))
    scales = [2 ** (i / 3) for i in range(3)]
    sizes = tuple(tuple(args.anchor_scale * stride * s for s in scales) for stride in (8, 16, 32, 64, 128))
    anchors = AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * 5)
    norm = partial(nn.GroupNorm, 32) if args.group_norm else None
    head = RetinaNetHead(c, anchors.num_anchors_per_location()[0], args.num_classes, norm_layer=norm)
    model = RetinaNet(backbone, num_classes=args.num_classes, min_size=int(args.min_size), max_size=int(args.max_size),
                      image_mean=args.mean, image_std=args.std, anchor_generator=anchors, head=head,
                      score_thresh=args.score_threshold, nms_thresh=args.nms_iou,
                      detections_per_img=args.max_detections, topk_candidates=args.max_points)
    weights = "random"
    if args.weights:
        state = read_safetensors(args.weights)
        own = model.state_dict()
        missing = [k for k in own if k not in state]
        # torchvision's GroupNorm head convs have no bias (Conv2dNormActivation); detseg's have one.
        extra = [k for k in state if k not in own]
        shapes = [k for k in own if k in state and own[k].shape != state[k].shape]
        if not missing and not shapes and all(k.startswith("head.") and k.endswith(".0.bias") for k in extra):
            model.load_state_dict(state, strict=False)
            weights = "detseg's" + (" less its head convs' biases" if extra else "")
        else:
            print("predict_torchvision: %s does not fit (missing %s, unexpected %s, shapes %s); random weights" %
                  (args.weights, missing[:3], extra[:3], shapes[:3]), file=sys.stderr)
    return model.eval(), weights


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=18)
    ap.add_argument("--images", required=True)
    ap.add_argument("--fpn-channels", type=int, default=256)
    ap.add_argument("--group-norm", action="store_true")
    ap.add_argument("--num-classes", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-size", type=float, default=256)
    ap.add_argument("--max-size", type=float, default=352)
    ap.add_argument("--anchor-scale", type=float, default=4)
    ap.add_argument("--mean", type=float, nargs=3, default=[0.485, 0.456, 0.406])
    ap.add_argument("--std", type=float, nargs=3, default=[0.229, 0.224, 0.225])
    ap.add_argument("--score-threshold", type=float, default=0.05)
    ap.add_argument("--max-points", type=int, default=1000)
    ap.add_argument("--nms-iou", type=float, default=0.5)
    ap.add_argument("--max-detections", type=int, default=100)
    ap.add_argument("--weights", default="")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    files = sorted(os.path.join(args.images, f) for f in os.listdir(args.images)
                   if f.lower().endswith((".jpg", ".jpeg", ".png")))
    model, weights = build(args)

    def detect(path):
        image = torchvision.io.decode_image(torchvision.io.read_file(path), torchvision.io.ImageReadMode.RGB)
        return model([image.float() / 255.0])[0]

    with torch.inference_mode():
        detect(files[0])  # warm-up
        start = time.perf_counter()
        for path in files[1:]:
            detect(path)
        seconds = time.perf_counter() - start
    n = len(files) - 1
    print(json.dumps({"peer": "torchvision " + torchvision.__version__, "weights": weights, "images": n,
                      "seconds": seconds, "images_per_s": n / seconds if seconds > 0 else 0.0,
                      "threads": args.threads}))


if __name__ == "__main__":
    main()
