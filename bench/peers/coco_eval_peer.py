#!/usr/bin/python3
# Implements: the peers of `detseg coco-eval` for bench/bench_coco_eval.cpp, each a whole process as
# a user runs it: load the ground truth and the detections, evaluate, accumulate, summarize (bbox).
# Writes {"stats": [12 numbers]} to OUT_JSON so the benchmark can check the three agree.
# Usage: coco_eval_peer.py pycocotools|faster-coco-eval GT.json DT.json OUT_JSON
import contextlib
import io
import json
import sys


def main():
    peer, gt_file, dt_file, out_file = sys.argv[1:5]
    if peer == "pycocotools":
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval as Eval
    elif peer == "faster-coco-eval":
        from faster_coco_eval import COCO
        from faster_coco_eval import COCOeval_faster as Eval
    else:
        sys.exit(f"unknown peer {peer}")
    with contextlib.redirect_stdout(io.StringIO()):  # both print progress; the timing is the point
        gt = COCO(gt_file)
        dt = gt.loadRes(dt_file)
        e = Eval(gt, dt, "bbox")
        e.evaluate()
        e.accumulate()
        e.summarize()
    json.dump({"stats": [float(x) for x in e.stats]}, open(out_file, "w"))


if __name__ == "__main__":
    main()
