#!/usr/bin/python3
# Implements: the torchvision side of bench/bench_learning.sh: trains torchvision 0.26's RetinaNet
# with a ResNet-18 + FPN-256 body from scratch (trainable BatchNorm2d, all stages trained, P6/P7 from
# P5) on a COCO-format training set for a fixed wall-clock budget, with the recipe the detseg side
# gets from its config (SGD momentum, linear warm-up, clipping, batch, flips, keep-aspect resize),
# then writes its detections on the test set in COCO results format for the common evaluator.
# Prints one JSON line: steps, seconds, seconds per step, last loss.
#   learning_torchvision.py --train T.json --test V.json --images DIR --seconds S --out dets.json
import argparse
import json
import os
import random
import time

import torch
import torchvision
from torchvision.io import ImageReadMode, decode_image, read_file
from torchvision.models.detection import RetinaNet
from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
from torchvision.ops.feature_pyramid_network import LastLevelP6P7


def load_coco(path):
    with open(path) as f:
        coco = json.load(f)
    cats = sorted(c["id"] for c in coco["categories"])
    boxes = {img["id"]: [] for img in coco["images"]}
    for a in coco["annotations"]:
        if a.get("iscrowd", 0):
            continue
        x, y, w, h = a["bbox"]
        boxes[a["image_id"]].append(([x, y, x + w, y + h], cats.index(a["category_id"]) + 1))
    return coco["images"], boxes, cats


def read_image(images_dir, file_name):
    data = read_file(os.path.join(images_dir, file_name))
    return decode_image(data, mode=ImageReadMode.RGB).float() / 255.0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--train", required=True)
    p.add_argument("--test", required=True)
    p.add_argument("--images", required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--warmup-steps", type=int, default=100)
    p.add_argument("--warmup-init", type=float, default=0.001)
    p.add_argument("--clip", type=float, default=10.0)
    p.add_argument("--min-size", type=int, default=480)
    p.add_argument("--max-size", type=int, default=640)
    p.add_argument("--fpn", type=int, default=256)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    random.seed(a.seed)
    images, boxes, cats = load_coco(a.train)
    body = torchvision.models.resnet18(weights=None, norm_layer=torch.nn.BatchNorm2d)
    backbone = _resnet_fpn_extractor(body, 5, returned_layers=[2, 3, 4],
                                     extra_blocks=LastLevelP6P7(a.fpn, a.fpn), norm_layer=None)
    model = RetinaNet(backbone, num_classes=len(cats) + 1, min_size=a.min_size, max_size=a.max_size,
                      score_thresh=0.05, nms_thresh=0.5, detections_per_img=100)
    params = [q for q in model.parameters() if q.requires_grad]
    opt = torch.optim.SGD(params, lr=a.lr, momentum=a.momentum)

    cache = {}
    def example(img):
        if img["id"] not in cache:
            cache[img["id"]] = read_image(a.images, img["file_name"])
        x = cache[img["id"]]
        b = torch.tensor([bb for bb, _ in boxes[img["id"]]], dtype=torch.float32).reshape(-1, 4)
        labels = torch.tensor([c for _, c in boxes[img["id"]]], dtype=torch.int64)
        if random.random() < 0.5:  # horizontal flip, as detseg's train_input.hflip
            x = x.flip(-1)
            w = x.shape[-1]
            b = torch.stack([w - b[:, 2], b[:, 1], w - b[:, 0], b[:, 3]], 1)
        return x, {"boxes": b, "labels": labels}

    model.train()
    order, step, last_loss = [], 0, float("nan")
    start = time.perf_counter()
    while time.perf_counter() - start < a.seconds:
        if len(order) < a.batch:
            extra = list(range(len(images)))
            random.shuffle(extra)
            order += extra
        batch = [example(images[i]) for i in order[:a.batch]]
        order = order[a.batch:]
        warm = min(1.0, step / a.warmup_steps) if a.warmup_steps > 0 else 1.0
        for g in opt.param_groups:
            g["lr"] = a.lr * (a.warmup_init / a.lr * (1 - warm) + warm)
        losses = model([x for x, _ in batch], [t for _, t in batch])
        loss = sum(losses.values())
        opt.zero_grad()
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(params, a.clip)
        opt.step()
        step += 1
        last_loss = float(loss)
    seconds = time.perf_counter() - start

    test_images, _, test_cats = load_coco(a.test)
    assert test_cats == cats, "train and test categories differ"
    model.eval()
    results = []
    with torch.no_grad():
        for img in test_images:
            d = model([read_image(a.images, img["file_name"])])[0]
            for box, score, label in zip(d["boxes"].tolist(), d["scores"].tolist(), d["labels"].tolist()):
                x0, y0, x1, y1 = box
                results.append({"image_id": img["id"], "category_id": cats[label - 1],
                                "bbox": [x0, y0, x1 - x0, y1 - y0], "score": score})
    with open(a.out, "w") as f:
        json.dump(results, f)
    print(json.dumps({"steps": step, "seconds": seconds, "seconds_per_step": seconds / max(step, 1),
                      "last_loss": last_loss, "torchvision": torchvision.__version__}))


if __name__ == "__main__":
    main()
