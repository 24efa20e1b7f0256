#!/usr/bin/env python3
"""Peer of bench_loader.cpp: torchvision's DataLoader with the same work per image.

--pipeline flip: decode (PIL) -> RGB -> resize keep-aspect so the longer side fits 512 -> random
horizontal flip -> to tensor + normalise (ImageNet mean/std) -> pad bottom/right to 512x512.
--pipeline augment: the list bench_loader's "augment" runs, in transforms.v2 with each image's VOC
boxes as tv_tensors.BoundingBoxes: RandomHorizontalFlip, ColorJitter(brightness 0.2, contrast and
saturation 0.8-1.25, hue 0.02), RandomIoUCrop (SSD's crop), ScaleJitter(512, 0.8-1.2) +
RandomCrop(512, pad_if_needed), SanitizeBoundingBoxes, normalise, pad to 512x512.
Both: batch of 8, 2 workers. Prints one line: "torchvision images/s: X".
"""
import argparse
import glob
import os
import time
import xml.etree.ElementTree as ET

import torch
import torchvision.transforms.functional as F
from PIL import Image
from torchvision import tv_tensors
from torchvision.transforms import v2

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def voc_boxes(xml_path):
    boxes = []
    for obj in ET.parse(xml_path).getroot().iter("object"):
        b = obj.find("bndbox")
        x1, y1, x2, y2 = (float(b.find(k).text) for k in ("xmin", "ymin", "xmax", "ymax"))
        if x2 > x1 and y2 > y1:
            boxes.append([x1, y1, x2, y2])
    return boxes


class Flip(torch.utils.data.Dataset):
    def __init__(self, voc, size):
        self.files = sorted(glob.glob(os.path.join(voc, "JPEGImages", "*.jpg")))
        self.size = size

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        image = Image.open(self.files[i]).convert("RGB")
        w, h = image.size
        scale = min(self.size / h, self.size / w)
        nh, nw = round(h * scale), round(w * scale)
        image = F.resize(image, [nh, nw])
        if torch.rand(1).item() < 0.5:
            image = F.hflip(image)
        x = F.normalize(F.to_tensor(image), MEAN, STD)
        out = torch.zeros(3, self.size, self.size)
        out[:, :nh, :nw] = x
        return out, torch.tensor([nh, nw])


class Augment(torch.utils.data.Dataset):
    def __init__(self, voc, size):
        self.files = sorted(glob.glob(os.path.join(voc, "JPEGImages", "*.jpg")))
        self.boxes = [voc_boxes(os.path.join(voc, "Annotations", os.path.basename(f)[:-4] + ".xml"))
                      for f in self.files]
        self.size = size
        self.transform = v2.Compose([
            v2.RandomHorizontalFlip(0.5),
            v2.ColorJitter(brightness=0.2, contrast=(0.8, 1.25), saturation=(0.8, 1.25), hue=0.02),
            v2.RandomIoUCrop(),
            v2.ScaleJitter((size, size), scale_range=(0.8, 1.2)),
            v2.RandomCrop(size, pad_if_needed=True),
            v2.SanitizeBoundingBoxes(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(MEAN, STD),
        ])

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        image = tv_tensors.Image(F.pil_to_tensor(Image.open(self.files[i]).convert("RGB")))
        boxes = tv_tensors.BoundingBoxes(torch.tensor(self.boxes[i]).reshape(-1, 4), format="XYXY",
                                         canvas_size=image.shape[-2:])
        image, target = self.transform(image, {"boxes": boxes, "labels": torch.zeros(len(boxes), dtype=torch.int64)})
        out = torch.zeros(3, self.size, self.size)
        out[:, :image.shape[1], :image.shape[2]] = image
        return out, target["boxes"].shape[0]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--folder", required=True, help="VOC folder (JPEGImages/, Annotations/)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--pipeline", choices=["flip", "augment"], default="flip")
    a = p.parse_args()
    torch.set_num_threads(1)
    ds = (Flip if a.pipeline == "flip" else Augment)(a.folder, a.size)
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers)
    images = 0
    start = time.perf_counter()
    for _ in range(a.epochs):
        for batch, _extra in loader:
            images += batch.shape[0]
    seconds = time.perf_counter() - start
    print(f"torchvision images/s: {images / seconds:.1f} ({images} images in {seconds:.2f} s)")


if __name__ == "__main__":
    main()
