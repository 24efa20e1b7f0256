#!/usr/bin/env bash
# Predict throughput: images/s of `detseg predict` on a folder of the demo's images (640 x 480
# JPEGs) against (a) the same model exported with `detseg export --format onnx` and run by
# onnxruntime in Python (bench/peers/predict_onnxruntime.py: decode, preprocess, run, postprocess,
# onnxruntime's documented loop) and (b) torchvision's RetinaNet built the same way
# (bench/peers/predict_torchvision.py), all with the same thread count, each runtime waiting for
# work its own default way (onnxruntime's pool spins, detseg picks from the load at start, libgomp
# spins a while); --passive sets OMP_WAIT_POLICY=passive for detseg and torchvision (the method of
# the figures before 2026-12-07; onnxruntime does not read it).
# Models:
#   r18  configs/demo/retinanet_r18_bccd.yaml (ResNet-18, FPN 64, GroupNorm head, 256-352 px)
#   r50  the same with ResNet-50, FPN 256, the plain head (torchvision's retinanet_resnet50_fpn) at
#        the images' own size (480-640 px)
# Weights: --r18-checkpoint / --r50-checkpoint, else a 1-step checkpoint trained here (few or no
# scores then pass postprocess.score_threshold: the time is then the network's and the I/O's).
# detseg's figure is for whole processes: (N - 1) / (time for N images - time for 1 image), so
# start-up and model loading cancel out, as the peers' loops time N - 1 images after a warm-up.
# detseg runs three ways: batch 1 and batch B drawing every image and writing its PNG and the JSON,
# and batch B with --no-draw (the JSON only); the peers write nothing. "vs ort" and "vs tv" are
# detseg's images/s over the peer's, best of the drawn runs / --no-draw: >= 1 meets issue 42's goal.
# Usage: bash bench/bench_predict.sh [--images N] [--threads T] [--batch B] [--models r18,r50]
#          [--r18-checkpoint P] [--r50-checkpoint P] [--build DIR] [--keep] [--passive]
#          [--rounds R (default 3: the five runs alternate R times, medians reported)]
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$HERE/build
IMAGES=40
THREADS=2
BATCH=4
MODELS=r18,r50
R18_CKPT=""
R50_CKPT=""
KEEP=0
PASSIVE=0
ROUNDS=3
while (($#)); do
  case $1 in
    --images) IMAGES=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --r18-checkpoint) R18_CKPT=$2; shift 2 ;;
    --r50-checkpoint) R50_CKPT=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --passive) PASSIVE=1; shift ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    *) echo "bench_predict.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
BIN=$BUILD/detseg
PY=${DETSEG_PYTHON:-$HERE/.venv/bin/python}
((PASSIVE)) && export OMP_WAIT_POLICY=passive
OUT=$(mktemp -d /tmp/detseg_bench_predict.XXXXXX)
((KEEP)) || trap 'rm -rf "$OUT"' EXIT

"$BIN" info | grep '^machine'
echo "date $(date -u +%F), $IMAGES images, $THREADS threads, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "OMP_WAIT_POLICY ${OMP_WAIT_POLICY:-unset}"

# The image folders: N demo images, and the first of them alone (detseg's start-up run).
mkdir -p "$OUT/images" "$OUT/one"
ls "$HERE/assets/demo/images" | sort | head -n "$IMAGES" | while read -r f; do cp "$HERE/assets/demo/images/$f" "$OUT/images/"; done
cp "$OUT/images/$(ls "$OUT/images" | head -n 1)" "$OUT/one/"

cat > "$OUT/r50.yaml" <<EOF
_base_: $HERE/configs/demo/retinanet_r18_bccd.yaml
model: {backbone: resnet50, fpn_channels: 256, head_norm: none, min_dimension: 480,
        max_dimension: 640}
EOF

calc() { "$PY" -c "print($1)"; }

seconds() {  # command...: wall seconds of the command, its output discarded
  local start end
  start=$(date +%s.%N)
  "$@" > /dev/null 2>&1
  end=$(date +%s.%N)
  calc "$end - $start"
}

json_field() {  # json-line field
  "$PY" -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"
}

printf '%-5s %10s %10s %10s %12s %12s %12s %12s\n' model "detseg b1" "b$BATCH" "b$BATCH json" onnxruntime \
  torchvision "vs ort" "vs tv"
for model in ${MODELS//,/ }; do
  case $model in
    r18) config=$HERE/configs/demo/retinanet_r18_bccd.yaml; ckpt=$R18_CKPT
         peer_args=(--min-size 256 --max-size 352); tv_args=(--depth 18 --fpn-channels 64 --group-norm) ;;
    r50) config=$OUT/r50.yaml; ckpt=$R50_CKPT
         peer_args=(--min-size 480 --max-size 640); tv_args=(--depth 50 --fpn-channels 256) ;;
    *) echo "bench_predict.sh: unknown model $model (r18, r50)" >&2; exit 2 ;;
  esac
  if [[ -z $ckpt ]]; then
    "$BIN" --threads "$THREADS" -q train --config "$config" --model-dir "$OUT/$model" --set train.num_steps=1 \
      --set train.batch_size=1 --set train.checkpoint_every=1 --set "eval_input.annotations=''" > /dev/null
    ckpt=$OUT/$model/ckpt-1.dsckpt
  fi
  "$BIN" -q export --config "$config" --checkpoint "$ckpt" --format onnx -o "$OUT/$model.onnx" > /dev/null
  "$BIN" -q export --config "$config" --checkpoint "$ckpt" --format safetensors -o "$OUT/$model.safetensors" > /dev/null

  # Rounds alternate the five runs, so a slow minute of a shared machine touches all of them;
  # each column is the median over the rounds.
  cols=("" "" "" "" "")
  for ((round = 0; round < ROUNDS; ++round)); do
    k=0
    for run in "1" "$BATCH" "$BATCH --no-draw"; do
      read -r -a flags <<< "--batch $run"
      predict=("$BIN" --threads "$THREADS" -q predict --config "$config" --checkpoint "$ckpt" "${flags[@]}")
      t1=$(seconds "${predict[@]}" --input "$OUT/one" --output "$OUT/pred_one")
      tn=$(seconds "${predict[@]}" --input "$OUT/images" --output "$OUT/pred_${model}_${run// /}")
      rm -rf "$OUT/pred_one" "$OUT/pred_${model}_${run// /}"
      cols[k]+=" $(calc "round(($IMAGES - 1) / ($tn - $t1), 2)")"
      k=$((k + 1))
    done
    ort=$("$PY" "$HERE/bench/peers/predict_onnxruntime.py" --model "$OUT/$model.onnx" --images "$OUT/images" \
          --threads "$THREADS" "${peer_args[@]}")
    tv=$("$PY" "$HERE/bench/peers/predict_torchvision.py" --images "$OUT/images" --threads "$THREADS" \
         --anchor-scale 3 --weights "$OUT/$model.safetensors" "${peer_args[@]}" "${tv_args[@]}")
    cols[3]+=" $(calc "round($(json_field "$ort" images_per_s), 2)")"
    cols[4]+=" $(calc "round($(json_field "$tv" images_per_s), 2)")"
  done
  read -r b1 bb json ort_rate tv_rate <<< "$(for c in "${cols[@]}"; do
    "$PY" -c 'import statistics, sys; print(statistics.median(map(float, sys.argv[1:])))' $c; done | tr '\n' ' ')"
  drawn=$(printf '%s\n' "$b1" "$bb" | sort -g | tail -n 1)
  printf '%-5s %10.2f %10.2f %10.2f %12.2f %12.2f %5.2f / %4.2f %5.2f / %4.2f   (images/s, median of %d; torchvision weights: %s)\n' \
    "$model" "$b1" "$bb" "$json" "$ort_rate" "$tv_rate" "$(calc "$drawn / $ort_rate")" \
    "$(calc "$json / $ort_rate")" "$(calc "$drawn / $tv_rate")" "$(calc "$json / $tv_rate")" "$ROUNDS" \
    "$(json_field "$tv" weights)"
  echo "      rounds: detseg b1${cols[0]}; b$BATCH${cols[1]}; b$BATCH json${cols[2]}; onnxruntime${cols[3]}; torchvision${cols[4]}"
done
