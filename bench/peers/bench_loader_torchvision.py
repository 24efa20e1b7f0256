#!/usr/bin/env python3
"""Peer of bench_loader.cpp: torchvision's DataLoader with the same work per image.

decode (PIL) -> RGB -> resize keep-aspect so the longer side fits 512 -> random horizontal flip ->
to tensor + normalise (ImageNet mean/std) -> pad bottom/right to 512x512 -> batch of 8, 2 workers.
Prints one line: "torchvision images/s: X".  Run with /usr/bin/python3.
"""
import argparse
import glob
import os
import time

import torch
import torchvision.transforms.functional as F
from PIL import Image

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


class Folder(torch.utils.data.Dataset):
    def __init__(self, folder, size):
        self.files = sorted(glob.glob(os.path.join(folder, "*.jpg")))
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--folder", required=True)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--size", type=int, default=512)
    a = p.parse_args()
    torch.set_num_threads(1)
    ds = Folder(a.folder, a.size)
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers)
    images = 0
    start = time.perf_counter()
    for _ in range(a.epochs):
        for batch, _sizes in loader:
            images += batch.shape[0]
    seconds = time.perf_counter() - start
    print(f"torchvision images/s: {images / seconds:.1f} ({images} images in {seconds:.2f} s)")


if __name__ == "__main__":
    main()
