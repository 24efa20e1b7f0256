#!/usr/bin/python3
"""torchvision side of bench/run_ops.sh: makes the benchmark inputs (raw float32/int64 files),
times torchvision's CPU ops on them and writes its timings and outputs for bench_ops to compare.

    /usr/bin/python3 bench/peers/ops_peer.py OUT_DIR [--threads 2] [--skip-100k]
"""
import argparse
import json
import os
import time

import torch
import torchvision


def timed(fn, reps):
    best = None
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return best, out


def rand_boxes(n, gen):
    # Boxes of 1..101 px anywhere in a 1000 x 1000 image; about 70% survive NMS at IoU 0.5.
    xy = torch.rand(n, 2, generator=gen) * 1000
    wh = torch.rand(n, 2, generator=gen) * 100 + 1
    return torch.cat([xy, xy + wh], 1)


def save(out_dir, name, t):
    t.contiguous().numpy().tofile(os.path.join(out_dir, name + ".bin"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-100k", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.makedirs(args.out_dir, exist_ok=True)
    gen = torch.Generator().manual_seed(0)
    res = {"threads": args.threads}

    sizes = [10000] + ([] if args.skip_100k else [100000])
    for n in sizes:
        b, s = rand_boxes(n, gen), torch.rand(n, generator=gen)
        save(args.out_dir, f"nms{n}_boxes", b)
        save(args.out_dir, f"nms{n}_scores", s)
        t, keep = timed(lambda: torchvision.ops.nms(b, s, 0.5), 3 if n <= 10000 else 1)
        save(args.out_dir, f"nms{n}_keep", keep)
        res[f"nms_{n}"] = {"seconds": t, "kept": len(keep)}

    b, s = rand_boxes(80000, gen), torch.rand(80000, generator=gen)
    c = torch.arange(80).repeat_interleave(1000)
    for name, t_ in (("bnms_boxes", b), ("bnms_scores", s), ("bnms_classes", c)):
        save(args.out_dir, name, t_)
    t, keep = timed(lambda: torchvision.ops.batched_nms(b, s, c, 0.5), 3)
    save(args.out_dir, "bnms_keep", keep)
    res["batched_nms_80x1000"] = {"seconds": t, "kept": len(keep)}

    feat = torch.randn(2, 256, 80, 80, generator=gen)
    xy = torch.rand(1000, 2, generator=gen) * 560
    wh = torch.rand(1000, 2, generator=gen) * 200 + 4
    rois = torch.cat([torch.randint(0, 2, (1000, 1), generator=gen).float(), xy, xy + wh], 1)
    save(args.out_dir, "roi_feat", feat)
    save(args.out_dir, "roi_rois", rois)

    def fwd():
        return torchvision.ops.roi_align(feat, rois, (7, 7), 1 / 8, 2, True)

    t, out = timed(fwd, 3)
    save(args.out_dir, "roi_out_first20", out[:20])
    res["roi_align_forward"] = {"seconds": t}

    def fwd_bwd():
        x = feat.clone().requires_grad_(True)
        torchvision.ops.roi_align(x, rois, (7, 7), 1 / 8, 2, True).sum().backward()
        return x.grad

    t, grad = timed(fwd_bwd, 3)
    save(args.out_dir, "roi_grad_first_channel", grad[:, :1])
    res["roi_align_forward_backward"] = {"seconds": t}
    with open(os.path.join(args.out_dir, "torchvision.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
