#!/usr/bin/env bash
# The equal-time benchmark's training step (bench/configs/learning_retinanet_r18_bccd.yaml, the
# README demo's network at the demo's size, batch 4) timed in alternated rounds, so that a shared
# machine's drift falls on every variant alike. Each detseg variant is a 60-step `detseg train` on
# BCCD's train split with steps 20-60 timed (from its metrics.jsonl); `torchvision` is 50 seconds of
# bench/peers/learning_torchvision.py (its mean seconds a step). Prints one line per run.
#   bash bench/step_rounds.sh ROUNDS VARIANT...
# VARIANT: torchvision, or NAME[:VAR=VALUE,VAR=VALUE...] (environment for that detseg run), e.g.
#   bash bench/step_rounds.sh 3 cl:GOMP_SPINCOUNT=10000 nchw:GOMP_SPINCOUNT=10000,DETSEG_CHANNELS_LAST=0 torchvision
# (DETSEG_ENGINE=/path/to/another/detseg-engine in a variant times another build; CONFIG=FILE trains
# that config instead of the bench's, e.g. one with `_base_: learning_retinanet_r18_bccd.yaml` and
# another train_input.augment list, as bench/configs/learning_retinanet_r18_bccd_mosaic.yaml.)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
rounds=$1; shift
bin=${DETSEG_BIN:-$here/build/detseg}
python=${DETSEG_PYTHON:-$here/.venv/bin/python}
images=${BCCD_DIR:-$here/../shared/data/bccd}/BCCD/JPEGImages
out=$(mktemp -d /tmp/detseg_step_rounds.XXXXXX)
bash "$here/bench/data/bccd_to_coco.sh" "$bin" "$(dirname "$images")" "$out"
"$bin" info | grep '^machine'
echo "runs in $out"
for ((round = 1; round <= rounds; ++round)); do
  for variant in "$@"; do
    if [[ $variant == torchvision ]]; then
      "$python" "$here/bench/peers/learning_torchvision.py" --train "$out/train.json" --test "$out/test.json" \
        --images "$images" --seconds 50 --threads 2 --out "$out/tv-detections.json" > "$out/tv.json" 2> "$out/tv.err"
      "$python" -c "import json, sys; print(f'round $round torchvision {json.load(open(sys.argv[1]))[\"seconds_per_step\"]:.4f}')" "$out/tv.json"
      continue
    fi
    name=${variant%%:*}; env_list=(); config=$here/bench/configs/learning_retinanet_r18_bccd.yaml
    [[ $variant == *:* ]] && IFS=, read -r -a env_list <<< "${variant#*:}"
    for i in "${!env_list[@]}"; do
      [[ ${env_list[$i]} == CONFIG=* ]] && { config=${env_list[$i]#CONFIG=}; unset 'env_list[i]'; }
    done
    run=$out/$name-$round
    env "${env_list[@]}" "$bin" --threads 2 -q train --config "$config" \
      --set "train_input.annotations=$out/train.json" --set "train_input.images=$images" \
      --set "eval_input.annotations=$out/test.json" --set "eval_input.images=$images" --set eval_input.max_images=4 \
      --set train.num_steps=60 --set eval.every_steps=0 --set train.log_every=20 --set train.checkpoint_every=100000 \
      --model-dir "$run" > "$run.log" 2>&1
    "$python" - "$run/metrics.jsonl" "round $round $name" <<'PY'
import json, sys
rows = {r["step"]: r for r in map(json.loads, open(sys.argv[1])) if r.get("split") == "train"}
print(f"{sys.argv[2]} {(rows[60]['time'] - rows[20]['time']) / 40:.4f}")
PY
  done
done
