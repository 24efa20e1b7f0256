#!/usr/bin/python3
# Implements: the torchvision side of bench/bench_learning.sh: trains torchvision 0.26's RetinaNet
# as the detseg demo builds it (ResNet-18 from scratch with trainable BatchNorm2d, every stage
# trained, FPN of --fpn channels with P6/P7 from P5, the v2 head with GroupNorm(32), anchors
# anchor_scale x stride, 3 scales x 3 ratios) on a COCO-format training set for a fixed wall-clock
# budget with the recipe of bench/configs/learning_retinanet_r18_bccd.yaml (Adam, linear warm-up
# then constant, clipping, batch, flips, keep-aspect resize padded to 32; with --ema-decay the
# config's weight average), then writes its detections on the test set in COCO results format for
# the common evaluator (with --eval-every, also every N steps: bench/learning_curves.sh).
# Prints one JSON line: steps, seconds, seconds per step, last loss.
#   learning_torchvision.py --train T.json --test V.json --images DIR --seconds S --out dets.json
import argparse
import contextlib
import functools
import json
import os
import random
import sys
import time

import torch
import torchvision
from torchvision.io import ImageReadMode, decode_image, read_file
from torchvision.models.detection import RetinaNet
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.backbone_utils import BackboneWithFPN
from torchvision.models.detection.retinanet import RetinaNetHead
from torchvision.ops.feature_pyramid_network import LastLevelP6P7


def load_coco(path):
    with open(path) as f:
        coco = json.load(f)
    cats = sorted(c["id"] for c in coco["categories"])
    boxes = {img["id"]: [] for img in coco["images"]}
    sizes = {img["id"]: (img["width"], img["height"]) for img in coco["images"]}
    for a in coco["annotations"]:
        if a.get("iscrowd", 0):
            continue
        # detseg's train_input.box_policy clip: clipped to the image, degenerate boxes dropped.
        x, y, w, h = a["bbox"]
        iw, ih = sizes[a["image_id"]]
        x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + w, iw), min(y + h, ih)
        if x1 <= x0 or y1 <= y0:
            continue
        boxes[a["image_id"]].append(([x0, y0, x1, y1], cats.index(a["category_id"])))
    return coco["images"], boxes, cats


def read_image(images_dir, file_name):
    data = read_file(os.path.join(images_dir, file_name))
    return decode_image(data, mode=ImageReadMode.RGB).float() / 255.0


def write_detections(model, images_dir, test_images, cats, path, averages=None):
    was_training = model.training
    if averages is not None:  # evaluate the averaged weights, as detseg's EmaScope does
        current = {k: v.detach().clone() for k, v in model.state_dict().items() if k in averages}
        model.load_state_dict(averages, strict=False)
    model.eval()
    results = []
    with torch.no_grad():
        for img in test_images:
            d = model([read_image(images_dir, img["file_name"])])[0]
            for box, score, label in zip(d["boxes"].tolist(), d["scores"].tolist(), d["labels"].tolist()):
                x0, y0, x1, y1 = box
                results.append({"image_id": img["id"], "category_id": cats[label],
                                "bbox": [x0, y0, x1 - x0, y1 - y0], "score": score})
    with open(path, "w") as f:
        json.dump(results, f)
    if averages is not None:
        model.load_state_dict(current, strict=False)
    model.train(was_training)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--train", required=True)
    p.add_argument("--test", required=True)
    p.add_argument("--images", required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--warmup-steps", type=int, default=25)
    p.add_argument("--warmup-init", type=float, default=0.0001)
    p.add_argument("--clip", type=float, default=10.0)
    p.add_argument("--min-size", type=int, default=256)
    p.add_argument("--max-size", type=int, default=352)
    p.add_argument("--fpn", type=int, default=64)
    p.add_argument("--anchor-scale", type=float, default=3.0)
    p.add_argument("--seed", type=int, default=1)
    # Op-level profile of steps W+1..W+N (torch.profiler), for detseg's train.profile to set beside:
    # the table by self CPU time goes to --profile-out.
    p.add_argument("--profile-steps", type=int, default=0)
    p.add_argument("--profile-warmup", type=int, default=10)
    p.add_argument("--profile-out", default="")
    # Learning curves: --eval-every N writes the test set's detections after every N steps to
    # OUT.step-N.json (the time spent there is left out of the budget); --max-steps ends the run
    # after that many steps even inside the budget.
    p.add_argument("--eval-every", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=0)
    # detseg's train.moving_average_decay: an average of every floating-point parameter and
    # buffer (batch-norm statistics too), decay min(D, (1 + n) / (10 + n)) after update n, used
    # for every evaluation. 0: off.
    p.add_argument("--ema-decay", type=float, default=0.0)
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    random.seed(a.seed)
    images, boxes, cats = load_coco(a.train)
    test_images, _, test_cats = load_coco(a.test)
    assert test_cats == cats, "train and test categories differ"
    body = torchvision.models.resnet18(weights=None, norm_layer=torch.nn.BatchNorm2d)
    backbone = BackboneWithFPN(body, return_layers={"layer2": "0", "layer3": "1", "layer4": "2"},
                               in_channels_list=[128, 256, 512], out_channels=a.fpn,
                               extra_blocks=LastLevelP6P7(a.fpn, a.fpn))
    octave = (1.0, 2 ** (1 / 3), 2 ** (2 / 3))
    anchors = AnchorGenerator(tuple(tuple(a.anchor_scale * 2 ** level * o for o in octave) for level in range(3, 8)),
                              ((0.5, 1.0, 2.0),) * 5)
    head = RetinaNetHead(a.fpn, 9, len(cats), norm_layer=functools.partial(torch.nn.GroupNorm, 32))
    # Labels 0..K-1, K sigmoid outputs: detseg's layout (no background logit).
    model = RetinaNet(backbone, num_classes=len(cats), min_size=a.min_size, max_size=a.max_size,
                      anchor_generator=anchors, head=head, score_thresh=0.05, nms_thresh=0.5,
                      detections_per_img=100, topk_candidates=1000)
    params = [q for q in model.parameters() if q.requires_grad]
    averages, averaged = None, []
    if a.ema_decay > 0:
        averages = {k: v.detach().clone() for k, v in model.state_dict().items() if v.is_floating_point()}
        # state_dict's tensors share the parameters' and buffers' memory, updated in place: pair once.
        averaged = [(averages[k], v) for k, v in model.state_dict().items() if k in averages]
    opt = torch.optim.Adam(params, lr=a.lr)

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
    profiler = None
    # Phase marks only when profiling: the timed runs keep the step they always had.
    phase = torch.profiler.record_function if a.profile_steps > 0 else (lambda name: contextlib.nullcontext())
    start = time.perf_counter()
    while time.perf_counter() - start < a.seconds and (a.max_steps <= 0 or step < a.max_steps):
        if a.profile_steps > 0 and step == a.profile_warmup:
            profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
            profiler.__enter__()
        if len(order) < a.batch:
            extra = list(range(len(images)))
            random.shuffle(extra)
            order += extra
        batch = [example(images[i]) for i in order[:a.batch]]
        order = order[a.batch:]
        warm = min(1.0, step / a.warmup_steps) if a.warmup_steps > 0 else 1.0
        for g in opt.param_groups:
            g["lr"] = a.lr * (a.warmup_init / a.lr * (1 - warm) + warm)
        with phase("peer::forward_and_losses"):
            losses = model([x for x, _ in batch], [t for _, t in batch])
            loss = sum(losses.values())
        with phase("peer::zero_grad"):
            opt.zero_grad()
        with phase("peer::backward"):
            loss.backward()
        with phase("peer::clip_and_update"):
            if a.clip > 0:
                torch.nn.utils.clip_grad_norm_(params, a.clip)
            opt.step()
        step += 1
        if averaged:
            decay = min(a.ema_decay, (1.0 + step) / (10.0 + step))
            with torch.no_grad():
                for average, current in averaged:
                    average.sub_((average - current) * (1.0 - decay))
        last_loss = loss.detach().item()
        if a.eval_every > 0 and step % a.eval_every == 0:
            paused = time.perf_counter()
            write_detections(model, a.images, test_images, cats, f"{a.out}.step-{step}.json", averages)
            print(json.dumps({"step": step, "loss": last_loss, **{k: v.item() for k, v in losses.items()}}),
                  file=sys.stderr, flush=True)
            start += time.perf_counter() - paused
        if profiler is not None and step == a.profile_warmup + a.profile_steps:
            profiler.__exit__(None, None, None)
            table = profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=45, max_name_column_width=60)
            with open(a.profile_out or a.out + ".profile.txt", "w") as f:
                f.write(f"profile of steps {a.profile_warmup + 1}-{step} (torch.profiler, CPU; times are totals "
                        f"over the {a.profile_steps} steps)\n{table}\n")
            profiler = None
    seconds = time.perf_counter() - start

    write_detections(model, a.images, test_images, cats, a.out, averages)
    print(json.dumps({"steps": step, "seconds": seconds, "seconds_per_step": seconds / max(step, 1),
                      "last_loss": last_loss, "torchvision": torchvision.__version__}))


if __name__ == "__main__":
    main()
