#!/usr/bin/env bash
# The main job: set up, build, train RetinaNet on the bundled BCCD demo set, evaluate it (COCO
# metrics), and draw predictions on the validation images.
#   scripts/demo.sh [config]   (default configs/demo/retinanet_r18_bccd.yaml)
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-configs/demo/retinanet_r18_bccd.yaml}
bash scripts/build.sh detseg
run=runs/demo-$(basename "$config" .yaml)
rm -rf "$run"
./build/detseg train --config "$config" --model-dir "$run"
./build/detseg eval --config "$config" --model-dir "$run" --json "$run/eval.json"
./build/detseg predict --config "$config" --checkpoint "$(ls -1 "$run"/ckpt-*.dsckpt | sort -V | tail -1)" \
  --input assets/demo/images/val --output "$run/predictions"
echo "demo done: metrics in $run/eval.json, drawings in $run/predictions/"
