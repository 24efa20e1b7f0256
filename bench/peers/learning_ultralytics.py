#!/usr/bin/python3
# Implements: the Ultralytics side of bench/bench_learning.sh: YOLO11n trained from scratch (its
# yolo11n.yaml, no weights downloaded) with Ultralytics' default recipe and augmentation (mosaic,
# HSV, translate/scale, flips; SGD/AdamW chosen by its `optimizer=auto`) on the same COCO-format
# training set, for the same wall-clock budget (its `time` argument) on the same threads, at
# imgsz = detseg's longest side; then its detections on the test set in COCO results format for
# the common evaluator (detseg coco-eval), at Ultralytics' own evaluation settings (conf 0.001,
# IoU 0.7, 100 per image... the ones its `val` uses).
# Prints one JSON line: steps (batches), epochs, seconds (set-up, training and its closing
# validation), seconds per step, threads.
#   learning_ultralytics.py --train T.json --test V.json --images DIR --seconds S --out dets.json
#       --work DIR [--threads 2] [--imgsz 352]
# Needs `scripts/setup.sh --ultralytics`. Runs offline (YOLO_OFFLINE, no plots, no AMP check).
import argparse
import json
import os
import time

from learning_torchvision import load_coco  # the same boxes as the torchvision side (beside this file)


def write_yolo_split(coco_path, images_dir, work, split):
    """COCO boxes as YOLO label files (class cx cy w h, normalised) beside links to the images;
    boxes clipped and filtered as the torchvision side reads them (its load_coco)."""
    images, boxes, _ = load_coco(coco_path)
    image_dir = os.path.join(work, "images", split)
    label_dir = os.path.join(work, "labels", split)
    os.makedirs(image_dir, exist_ok=True)
    os.makedirs(label_dir, exist_ok=True)
    paths = []
    for img in images:
        w, h = img["width"], img["height"]
        name = os.path.basename(img["file_name"])
        link = os.path.join(image_dir, name)
        if not os.path.exists(link):
            os.symlink(os.path.abspath(os.path.join(images_dir, img["file_name"])), link)
        lines = [f"{k} {(x0 + x1) / 2 / w:.6f} {(y0 + y1) / 2 / h:.6f} {(x1 - x0) / w:.6f} {(y1 - y0) / h:.6f}"
                 for (x0, y0, x1, y1), k in boxes[img["id"]]]
        with open(os.path.join(label_dir, os.path.splitext(name)[0] + ".txt"), "w") as f:
            f.write("\n".join(lines) + ("\n" if lines else ""))
        paths.append((img["id"], link))
    return paths


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--train", required=True)
    p.add_argument("--test", required=True)
    p.add_argument("--images", required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--imgsz", type=int, default=352)
    args = p.parse_args()
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ["YOLO_CONFIG_DIR"] = os.path.join(args.work, "config")

    with open(args.train) as f:
        categories = sorted(json.load(f)["categories"], key=lambda c: c["id"])
    cats = [c["id"] for c in categories]
    write_yolo_split(args.train, args.images, args.work, "train")
    test_images = write_yolo_split(args.test, args.images, args.work, "test")
    data = os.path.join(args.work, "data.yaml")
    with open(data, "w") as f:
        f.write(f"path: {os.path.abspath(args.work)}\ntrain: images/train\nval: images/test\nnames:\n")
        for k, c in enumerate(categories):
            f.write(f"  {k}: {json.dumps(c['name'])}\n")

    start = time.time()
    import torch
    from ultralytics import YOLO

    import ultralytics.utils.torch_utils

    # Ultralytics trains on min(8, cpu_count - 1) threads (1 on 2 cores): the same threads as the others.
    ultralytics.utils.torch_utils.NUM_THREADS = args.threads
    torch.set_num_threads(args.threads)
    steps, epochs = [0], [0]
    model = YOLO("yolo11n.yaml")
    model.add_callback("on_train_batch_end", lambda trainer: steps.__setitem__(0, steps[0] + 1))
    model.add_callback("on_train_epoch_end", lambda trainer: epochs.__setitem__(0, epochs[0] + 1))
    # val=False: no validation between epochs (more of the budget trains); Ultralytics still
    # validates once after its last epoch, inside the budget's end.
    model.train(data=data, time=args.seconds / 3600, epochs=100000, imgsz=args.imgsz, device="cpu",
                pretrained=False, amp=False, plots=False, val=False, seed=1, project=args.work, name="train",
                exist_ok=True, verbose=False)
    seconds = time.time() - start
    weights = os.path.join(args.work, "train", "weights", "last.pt")
    trained = YOLO(weights)
    results = []
    for image_id, path in test_images:
        r = trained.predict(path, imgsz=args.imgsz, conf=0.001, iou=0.7, max_det=100, device="cpu", verbose=False)[0]
        for (x0, y0, x1, y1), k, score in zip(r.boxes.xyxy.tolist(), r.boxes.cls.tolist(), r.boxes.conf.tolist()):
            results.append({"image_id": image_id, "category_id": cats[int(k)],
                            "bbox": [x0, y0, x1 - x0, y1 - y0], "score": score})
    with open(args.out, "w") as f:
        json.dump(results, f)
    print(json.dumps({"steps": steps[0], "epochs": epochs[0], "seconds": seconds,
                      "seconds_per_step": seconds / max(steps[0], 1), "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
