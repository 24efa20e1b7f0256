#!/usr/bin/env python3
# Implements: the onnxruntime peer of bench/bench_predict.sh: a RetinaNet exported by
# `detseg export --format onnx` run over a folder of images the way onnxruntime's documentation
# shows a detector run (an InferenceSession, then per image: decode, preprocess, session.run,
# postprocess in NumPy), with detseg's preprocessing and postprocessing:
#   decode      PIL, RGB
#   preprocess  keep-aspect resize (shorter side to --min-size unless the longer passes --max-size),
#               bilinear; /255, minus mean, over std; zero-padded bottom/right to the graph's input
#   run         intra-op threads = --threads, one inter-op thread, sequential execution
#   postprocess sigmoid; the top --max-points (anchor, class) pairs; scores >= --score-threshold;
#               boxes decoded from the anchors (ty, tx, th, tw: docs/export.md), clipped to the
#               resized image; per-class NMS at --nms-iou; the best --max-detections; rescaled
# Prints one JSON line: images, seconds of the loop (after one warm-up image), images_per_s, and the
# detections of the first image (for a check against detseg's).
# Usage: predict_onnxruntime.py --model M.onnx --images DIR [--threads 2] [--min-size 256] [--max-size 352]
import argparse
import json
import os
import time

import numpy as np
import onnxruntime as ort
from PIL import Image


def nms(boxes, scores, iou_threshold):
    """Greedy NMS (torchvision.ops.nms's contract): kept indices by decreasing score."""
    order = np.argsort(-scores, kind="stable")
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    keep = []
    while order.size > 0:
        i = order[0]
        keep.append(i)
        rest = order[1:]
        xx1 = np.maximum(boxes[i, 0], boxes[rest, 0])
        yy1 = np.maximum(boxes[i, 1], boxes[rest, 1])
        xx2 = np.minimum(boxes[i, 2], boxes[rest, 2])
        yy2 = np.minimum(boxes[i, 3], boxes[rest, 3])
        inter = np.clip(xx2 - xx1, 0, None) * np.clip(yy2 - yy1, 0, None)
        iou = inter / (areas[i] + areas[rest] - inter + 1e-12)
        order = rest[iou <= iou_threshold]
    return np.array(keep, dtype=np.int64)


class Detector:
    def __init__(self, args):
        options = ort.SessionOptions()
        options.intra_op_num_threads = args.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
        shape = self.session.get_inputs()[0].shape  # [1, 3, H, W]
        self.height, self.width = int(shape[2]), int(shape[3])
        self.input_name = self.session.get_inputs()[0].name
        self.mean = np.array(args.mean, np.float32).reshape(3, 1, 1)
        self.std = np.array(args.std, np.float32).reshape(3, 1, 1)
        self.args = args

    def preprocess(self, rgb):
        h, w = rgb.shape[:2]
        scale = self.args.min_size / min(h, w)
        if max(h, w) * scale > self.args.max_size:
            scale = self.args.max_size / max(h, w)
        nh, nw = int(round(h * scale)), int(round(w * scale))
        resized = np.asarray(Image.fromarray(rgb).resize((nw, nh), Image.BILINEAR), np.float32)
        chw = (resized.transpose(2, 0, 1) / 255.0 - self.mean) / self.std
        batch = np.zeros((1, 3, self.height, self.width), np.float32)
        batch[0, :, :nh, :nw] = chw
        return batch, scale, nh, nw

    def postprocess(self, cls_logits, box_regression, anchors, scale, nh, nw):
        a = self.args
        logits = cls_logits[0]  # [A, K]
        k = logits.shape[1]
        flat = logits.ravel()
        top = min(a.max_points, flat.size)
        pick = np.argpartition(-flat, top - 1)[:top]
        scores = 1.0 / (1.0 + np.exp(-flat[pick]))
        keep = scores >= a.score_threshold
        pick, scores = pick[keep], scores[keep]
        anchor_index, classes = pick // k, pick % k
        anc = anchors[anchor_index]
        codes = box_regression[0][anchor_index]
        ha, wa = anc[:, 3] - anc[:, 1], anc[:, 2] - anc[:, 0]
        ya, xa = anc[:, 1] + 0.5 * ha, anc[:, 0] + 0.5 * wa
        yc, xc = ya + codes[:, 0] * ha, xa + codes[:, 1] * wa
        h, w = ha * np.exp(codes[:, 2]), wa * np.exp(codes[:, 3])
        boxes = np.stack([xc - 0.5 * w, yc - 0.5 * h, xc + 0.5 * w, yc + 0.5 * h], axis=1)
        boxes[:, 0::2] = np.clip(boxes[:, 0::2], 0, nw)
        boxes[:, 1::2] = np.clip(boxes[:, 1::2], 0, nh)
        # Per-class NMS in one pass: boxes of different classes moved apart so they never overlap.
        offset = classes[:, None].astype(np.float32) * (max(nh, nw) + 1.0)
        kept = nms(boxes + offset, scores, a.nms_iou)[:a.max_detections]
        return boxes[kept] / scale, scores[kept], classes[kept]

    def __call__(self, path):
        rgb = np.asarray(Image.open(path).convert("RGB"))
        batch, scale, nh, nw = self.preprocess(rgb)
        cls_logits, box_regression, anchors = self.session.run(None, {self.input_name: batch})
        return self.postprocess(cls_logits, box_regression, anchors, scale, nh, nw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--images", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-size", type=float, default=256)
    ap.add_argument("--max-size", type=float, default=352)
    ap.add_argument("--mean", type=float, nargs=3, default=[0.485, 0.456, 0.406])
    ap.add_argument("--std", type=float, nargs=3, default=[0.229, 0.224, 0.225])
    ap.add_argument("--score-threshold", type=float, default=0.05)
    ap.add_argument("--max-points", type=int, default=1000)
    ap.add_argument("--nms-iou", type=float, default=0.5)
    ap.add_argument("--max-detections", type=int, default=100)
    args = ap.parse_args()
    files = sorted(os.path.join(args.images, f) for f in os.listdir(args.images)
                   if f.lower().endswith((".jpg", ".jpeg", ".png")))
    detect = Detector(args)
    boxes, scores, classes = detect(files[0])  # warm-up, and the first image's detections
    start = time.perf_counter()
    for path in files[1:]:
        detect(path)
    seconds = time.perf_counter() - start
    n = len(files) - 1
    first = [{"bbox": [float(v) for v in b], "score": float(s), "label": int(c)}
             for b, s, c in zip(boxes[:5], scores[:5], classes[:5])]
    print(json.dumps({"peer": "onnxruntime " + ort.__version__, "images": n, "seconds": seconds,
                      "images_per_s": n / seconds if seconds > 0 else 0.0, "threads": args.threads,
                      "first_image": first}))


if __name__ == "__main__":
    main()
