#!/usr/bin/env python3
# Implements: a large-image test set for scoring tiled prediction (docs/cli.md, "Large images"):
# BCCD platelets cut by their boxes from the demo's validation images (assets/demo/val.json:
# images no demo model trains on) and pasted at random places, randomly flipped, into large
# canvases of the smear's background colour (the median pixel of those images). Objects of
# 20-50 px in a 2000 x 1500 image: the whole image resized to the demo model's 256 px leaves them
# 3-8 px; tiles of about the demo images' height keep them at the size the model learnt. Paste
# places are drawn anywhere (so many straddle tile borders) but never overlapping another platelet.
# Writes IMAGES/tiled_NNN.jpg and a COCO file with the demo's categories (RBC 1, WBC 2,
# Platelets 3), so a demo checkpoint's category ids match. Deterministic for a seed.
#   .venv/bin/python bench/make_tiled_set.py [--out /tmp/detseg_tiled_set] [--images 10]
#       [--width 2000] [--height 1500] [--per-image 30] [--seed 0]
import argparse
import json
import os
import random

import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "assets", "demo")


def platelet_crops():
    """Each platelet box of val.json, cut from its image (RGB arrays), and the images' median pixel."""
    with open(os.path.join(DEMO, "val.json")) as f:
        val = json.load(f)
    files = {im["id"]: im["file_name"] for im in val["images"]}
    pixels, crops = [], []
    for image_id, name in sorted(files.items()):
        rgb = np.asarray(Image.open(os.path.join(DEMO, "images", name)).convert("RGB"))
        pixels.append(rgb.reshape(-1, 3)[::97])
        for a in val["annotations"]:
            if a["image_id"] != image_id or a["category_id"] != 3:
                continue
            x, y, w, h = (int(round(v)) for v in a["bbox"])
            crop = rgb[max(0, y):y + h, max(0, x):x + w]
            if crop.shape[0] >= 8 and crop.shape[1] >= 8:
                crops.append(crop)
    background = np.median(np.concatenate(pixels), axis=0).astype(np.uint8)
    return crops, background


def overlaps(box, boxes):
    x1, y1, x2, y2 = box
    return any(x1 < b[2] and b[0] < x2 and y1 < b[3] and b[1] < y2 for b in boxes)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="/tmp/detseg_tiled_set")
    ap.add_argument("--images", type=int, default=10)
    ap.add_argument("--width", type=int, default=2000)
    ap.add_argument("--height", type=int, default=1500)
    ap.add_argument("--per-image", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    crops, background = platelet_crops()
    rng = random.Random(args.seed)
    noise = np.random.default_rng(args.seed)
    image_dir = os.path.join(args.out, "images")
    os.makedirs(image_dir, exist_ok=True)
    coco = {"images": [], "annotations": [],
            "categories": [{"id": 1, "name": "RBC"}, {"id": 2, "name": "WBC"}, {"id": 3, "name": "Platelets"}]}
    for i in range(args.images):
        # The background with a little grain, so the canvas is not flat as no photo is.
        canvas = np.empty((args.height, args.width, 3), np.int16)
        canvas[:] = background
        canvas += noise.integers(-4, 5, size=canvas.shape, dtype=np.int16)
        canvas = np.clip(canvas, 0, 255).astype(np.uint8)
        boxes = []
        while len(boxes) < args.per_image:
            crop = crops[rng.randrange(len(crops))]
            if rng.random() < 0.5:
                crop = crop[:, ::-1]
            if rng.random() < 0.5:
                crop = crop[::-1, :]
            h, w = crop.shape[:2]
            x, y = rng.randrange(args.width - w), rng.randrange(args.height - h)
            box = (x, y, x + w, y + h)
            if overlaps(box, boxes):
                continue
            canvas[y:y + h, x:x + w] = crop
            boxes.append(box)
        name = f"tiled_{i:03d}.jpg"
        Image.fromarray(canvas).save(os.path.join(image_dir, name), quality=95)
        image_id = i + 1
        coco["images"].append({"id": image_id, "file_name": name, "width": args.width, "height": args.height})
        for x1, y1, x2, y2 in boxes:
            coco["annotations"].append({"id": len(coco["annotations"]) + 1, "image_id": image_id, "category_id": 3,
                                        "bbox": [x1, y1, x2 - x1, y2 - y1], "area": (x2 - x1) * (y2 - y1),
                                        "iscrowd": 0})
    with open(os.path.join(args.out, "tiled.json"), "w") as f:
        json.dump(coco, f)
    print(f"{args.images} images of {args.width}x{args.height} with {len(coco['annotations'])} platelets "
          f"({len(crops)} distinct crops) in {args.out}")


if __name__ == "__main__":
    main()
