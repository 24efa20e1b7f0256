#!/usr/bin/env bash
# Learning curves of bench_learning.sh's two RetinaNets, step by step: detseg and torchvision (the
# venv's 0.26) train the same model with the same recipe for the same number of steps, one after
# the other, each writing its detections on BCCD's test split every EVERY steps; all are scored by
# detseg coco-eval (equal to pycocotools). Prints, per step, each side's AP / AP50 / AP75 and
# per-class AP, so a gap at the end of an equal-time run can be placed: from the start, or
# growing with the steps (over-fitting, a late instability). Wall-clock time is not compared here.
#   bash bench/learning_curves.sh [steps, default 2000] [every, default 250] [threads, default 2] [--set key=value ...]
# The --set overrides go to detseg only; the peer takes detseg's train.moving_average_decay.
# DETSEG_BENCH_TORCHVISION=0 leaves torchvision out.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-2000}
every=${2:-250}
threads=${3:-2}
shift $(( $# < 3 ? $# : 3 ))
bin=${DETSEG_BIN:-$here/build/detseg}
python=${DETSEG_PYTHON:-$here/.venv/bin/python}
out=$(mktemp -d /tmp/detseg_learning_curves.XXXXXX)
images=${BCCD_DIR:-$here/../shared/data/bccd}/BCCD/JPEGImages
bash "$here/bench/data/bccd_to_coco.sh" "$bin" "$(dirname "$images")" "$out"
config=$here/bench/configs/learning_retinanet_r18_bccd.yaml
# The peer averages its weights as detseg's side does (train.moving_average_decay, 0: off).
ema=$("$bin" info --config "$config" "$@" --resolved | awk '/^  moving_average_decay:/ {print $2}')
"$bin" info | grep '^machine'
echo "learning curves: $steps steps, every $every, $threads threads, BCCD train -> test; results in $out${*:+; detseg $*}"

"$bin" --threads "$threads" -q train --config "$config" \
  --set "train_input.annotations=$out/train.json" --set "train_input.images=$images" \
  --set "eval_input.annotations=$out/test.json" --set "eval_input.images=$images" \
  --set "train.num_steps=$steps" --set "eval.every_steps=$every" --set eval.pictures=false "$@" \
  --model-dir "$out/detseg" > "$out/detseg-train.log" 2>&1
sides=(detseg)
if [[ ${DETSEG_BENCH_TORCHVISION:-1} != 0 ]]; then
  "$python" "$here/bench/peers/learning_torchvision.py" --train "$out/train.json" --test "$out/test.json" \
    --images "$images" --seconds 1e9 --max-steps "$steps" --eval-every "$every" --threads "$threads" \
    --ema-decay "${ema:-0}" \
    --out "$out/torchvision.json.dets" > "$out/torchvision.json" 2> "$out/torchvision-train.log"
  sides+=(torchvision)
fi
for ((s = every; s <= steps; s += every)); do
  "$bin" -q coco-eval --gt "$out/test.json" --dt "$out/detseg/eval/detections-$s.json" --json "$out/detseg-$s.json" > /dev/null
  if [[ ${#sides[@]} == 2 ]]; then
    "$bin" -q coco-eval --gt "$out/test.json" --dt "$out/torchvision.json.dets.step-$s.json" \
      --json "$out/torchvision-$s.json" > /dev/null
  fi
done
"$python" - "$out" "$steps" "$every" "${sides[@]}" <<'PY'
import json, os, sys
out, steps, every, sides = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
print(f"{'step':>6s} {'side':12s} {'AP':>6s} {'AP50':>6s} {'AP75':>6s}  per class AP")
for s in range(every, steps + 1, every):
    for who in sides:
        m = json.load(open(os.path.join(out, f"{who}-{s}.json")))
        per = "  ".join(f"{c['name']} {c['ap']:.3f}" for c in m["per_category"])
        print(f"{s:6d} {who:12s} {m['stats'][0]:6.3f} {m['stats'][1]:6.3f} {m['stats'][2]:6.3f}  {per}")
PY
