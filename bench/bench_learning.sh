#!/usr/bin/env bash
# Equal-time learning benchmark: detseg and torchvision (the venv's 0.26) train the same model
# (the README demo's RetinaNet-R18-FPN64 with a GroupNorm head, from scratch) with the same recipe for the same wall-clock minutes on this
# machine, one after the other, and both are scored by the same evaluator (detseg coco-eval, equal
# to pycocotools) on BCCD's test split. Prints steps, seconds per step, AP, AP50, AP75 and per-class AP.
# Where the venv has Ultralytics (scripts/setup.sh --ultralytics), YOLO11n runs third: the peer a
# user would pick instead, trained from scratch with its own default recipe and augmentation for
# the same minutes at imgsz 352 (detseg's longest side), scored the same way
# (bench/peers/learning_ultralytics.py). DETSEG_BENCH_YOLO=0 leaves it out; DETSEG_BENCH_TORCHVISION=0
# leaves torchvision out (to try detseg variants against an earlier run's peers).
# detseg's budget includes its start-up and data loading; it stops on SIGTERM (checkpoint, exit).
#   bash bench/bench_learning.sh [minutes per framework, default 8] [threads, default 2] [--data SET] [--set key=value ...]
# --data bccd (default: BCCD's VOC train -> test splits, 205 / 72 images, 3 classes) or
# coco128-person (a second held-out set nothing was tuned on: COCO128's photos, "person" boxes
# only, 96 train / 32 test images; bench/data/coco128_person.py, ../shared/data/coco128 or COCO128_DIR).
# The --set overrides go to detseg's train and eval only (e.g. --set model.box_loss=l1, to try a
# detseg variant against the same torchvision run); torchvision takes detseg's resolved
# train.moving_average_decay, so that a weight average is part of both recipes or of neither.
# Needs build/detseg (scripts/build.sh), the venv's torchvision (scripts/setup.sh --peers) and
# ../shared/data/bccd (or BCCD_DIR).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
minutes=${1:-8}
threads=${2:-2}
shift $(( $# < 2 ? $# : 2 ))
dataset=bccd; overrides=()
while (($#)); do
  case $1 in
    --data) dataset=$2; shift 2;;
    *) overrides+=("$1"); shift;;
  esac
done
bin=${DETSEG_BIN:-$here/build/detseg}
python=${DETSEG_PYTHON:-$here/.venv/bin/python}
out=$(mktemp -d /tmp/detseg_bench_learning.XXXXXX)
case $dataset in
  bccd)
    images=${BCCD_DIR:-$here/../shared/data/bccd}/BCCD/JPEGImages
    bash "$here/bench/data/bccd_to_coco.sh" "$bin" "$(dirname "$images")" "$out";;
  coco128-person)
    coco128=${COCO128_DIR:-$here/../shared/data/coco128}
    images=$coco128/val2017
    "$python" "$here/bench/data/coco128_person.py" "$coco128" "$out" > /dev/null
    overrides=(--set model.num_classes=1 "${overrides[@]}");;
  *) echo "unknown --data $dataset (bccd, coco128-person)" >&2; exit 2;;
esac
config=$here/bench/configs/learning_retinanet_r18_bccd.yaml
data=(--set "train_input.annotations=$out/train.json" --set "train_input.images=$images"
      --set "eval_input.annotations=$out/test.json" --set "eval_input.images=$images" "${overrides[@]}")
# The peer averages its weights as detseg's side does (train.moving_average_decay, 0: off).
ema=$("$bin" info --config "$config" "${data[@]}" --resolved | awk '/^  moving_average_decay:/ {print $2}')
"$bin" info | grep '^machine'
echo "equal-time learning: ${minutes} min each, $threads threads, $dataset train -> test; results in $out${overrides:+; detseg ${overrides[*]}}"

# detseg: trains until the budget's SIGTERM, which writes a checkpoint; then detections on test.
set +e
timeout -s TERM "${minutes}m" "$bin" --threads "$threads" -q train --config "$config" \
  "${data[@]}" --model-dir "$out/detseg" > "$out/detseg-train.log" 2>&1
set -e
ckpt=$(ls -1 "$out"/detseg/ckpt-*.dsckpt | sort -V | tail -1)
"$bin" --threads "$threads" -q eval --config "$config" "${data[@]}" --checkpoint "$ckpt" --no-metrics \
  --detections "$out/detseg-detections.json" > /dev/null

# torchvision: the same recipe in Python.
peers=(detseg)
if [[ ${DETSEG_BENCH_TORCHVISION:-1} != 0 ]]; then
  peers+=(torchvision)
  "$python" "$here/bench/peers/learning_torchvision.py" --train "$out/train.json" --test "$out/test.json" \
    --images "$images" --seconds $((minutes * 60)) --threads "$threads" --ema-decay "${ema:-0}" \
    --out "$out/torchvision-detections.json" > "$out/torchvision.json"
fi

# Ultralytics YOLO11n, where installed.
if [[ ${DETSEG_BENCH_YOLO:-1} != 0 ]] && "$python" -c "import importlib.util, sys; sys.exit(not importlib.util.find_spec('ultralytics'))"; then
  OMP_NUM_THREADS=$threads "$python" "$here/bench/peers/learning_ultralytics.py" --train "$out/train.json" \
    --test "$out/test.json" --images "$images" --seconds $((minutes * 60)) --threads "$threads" \
    --imgsz 352 --work "$out/yolo" --out "$out/yolo-detections.json" > "$out/yolo.json" 2> "$out/yolo-train.log"
  peers+=(yolo)
elif [[ ${DETSEG_BENCH_YOLO:-1} != 0 ]]; then
  echo "(Ultralytics not in the venv: scripts/setup.sh --ultralytics adds YOLO11n to this comparison)"
fi

for who in "${peers[@]}"; do
  "$bin" -q coco-eval --gt "$out/test.json" --dt "$out/$who-detections.json" --json "$out/$who-metrics.json" > /dev/null
done
"$python" - "$out" "$minutes" <<'PY'
import json, os, sys
out, minutes = sys.argv[1], float(sys.argv[2])
rows = [json.loads(l) for l in open(os.path.join(out, "detseg", "metrics.jsonl")) if '"split": "train"' in l or '"split":"train"' in l]
steps = max(r["step"] for r in rows)
span = rows[-1]["time"] - rows[0]["time"]
first = rows[0]["step"]
d_spp = span / max(steps - first, 1)
runs = {"detseg": (steps, d_spp)}
if os.path.exists(os.path.join(out, "torchvision-metrics.json")):
    tv = json.load(open(os.path.join(out, "torchvision.json")))
    runs["torchvision"] = (tv["steps"], tv["seconds_per_step"])
if os.path.exists(os.path.join(out, "yolo-metrics.json")):
    # The last line: Ultralytics prints its own notes to stdout before it.
    yolo = json.loads(open(os.path.join(out, "yolo.json")).read().strip().splitlines()[-1])
    runs["yolo11n"] = (yolo["steps"], yolo["seconds_per_step"])
print(f"{'':12s} {'steps':>6s} {'s/step':>7s} {'AP':>6s} {'AP50':>6s} {'AP75':>6s}  per class AP/AP50")
ap = {}
for who, (n, spp) in runs.items():
    m = json.load(open(os.path.join(out, f"{'yolo' if who == 'yolo11n' else who}-metrics.json")))
    per = "  ".join(f"{c['name']} {c['ap']:.3f}/{c.get('ap50', -1):.3f}" for c in m["per_category"])
    ap[who] = m["stats"]
    print(f"{who:12s} {n:6d} {spp:7.3f} {m['stats'][0]:6.3f} {m['stats'][1]:6.3f} {m['stats'][2]:6.3f}  {per}")
if "torchvision" in ap:
    print(f"detseg AP - torchvision AP at {minutes:g} min each: {ap['detseg'][0] - ap['torchvision'][0]:+.3f} (goal >= +0.03)")
if "yolo11n" in ap:
    print(f"detseg - YOLO11n at {minutes:g} min each: AP {ap['detseg'][0] - ap['yolo11n'][0]:+.3f}, "
          f"AP75 {ap['detseg'][2] - ap['yolo11n'][2]:+.3f} (goal >= 0)")
PY
