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
# train ends by evaluating the final weights on eval_input (COCO metrics, also in eval-final.json);
# `detseg eval --config C --model-dir D` does the same on its own.
./build/detseg train --config "$config" --model-dir "$run"
mkdir -p "$run/val_images"
if grep -q '^ *format: seg_folder' "$config"; then
  # Segmentation configs: the first 4 images of eval_input's image folder.
  images=$(sed -n '/^eval_input:/,$ s/^ *images: *//p' "$config" | head -1)
  for f in $(ls -1 "$(dirname "$config")/$images" | head -4); do
    ln -sf "$(cd "$(dirname "$config")/$images" && pwd)/$f" "$run/val_images/$f"
  done
else
  # The validation images, by the file names val.json lists.
  grep -o '"file_name": *"[^"]*"' assets/demo/val.json | sed 's/.*"\([^"]*\)"$/\1/' |
    while read -r f; do ln -sf "$PWD/assets/demo/images/$f" "$run/val_images/$f"; done
fi
./build/detseg predict --config "$config" --checkpoint "$(ls -1 "$run"/ckpt-*.dsckpt | sort -V | tail -1)" \
  --input "$run/val_images" --output "$run/predictions"
echo "demo done: metrics in $run/eval-final.json, pictures in $run/predictions/"
