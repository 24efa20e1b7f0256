#!/usr/bin/env bash
# Draws docs/images/augment_steps.jpg: one coco128 training image through each step of
# train_input.augment's catalogue (gate opened: probability 1), as `detseg augment` draws it, with
# the step's name above each cell. Run from anywhere after the build; takes about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
steps=(none random_horizontal_flip random_vertical_flip random_rotation90 random_image_scale random_jitter_boxes
       random_adjust_brightness random_adjust_contrast random_adjust_hue random_adjust_saturation random_distort_color
       random_rgb_to_gray random_pixel_value_scale random_black_patches random_jpeg_quality random_patch_gaussian
       random_crop_image random_pad_image random_crop_pad_image ssd_random_crop random_scale_crop_and_pad_to_square
       resize_min_max scale_jitter_crop mosaic mixup copy_paste)
declare -A params=(
  [random_adjust_brightness]="max_delta: 0.3" [random_adjust_hue]="max_delta: 0.2"
  [random_jpeg_quality]="max_jpeg_quality: 10" [random_patch_gaussian]="min_patch_size: 150, min_gaussian_stddev: 0.3"
  [random_crop_image]="min_object_covered: 0.5" [random_scale_crop_and_pad_to_square]="output_size: 0, scale_min: 0.5"
  [resize_min_max]="min_dimension: 200, max_dimension: 320, scale_min: 0.6, scale_max: 0.6"
  [scale_jitter_crop]="scale_min: 1.5, scale_max: 1.5")
for step in "${steps[@]}"; do
  {
    echo "_base_: $PWD/configs/demo/mask_rcnn_r18_fpn_coco128.yaml"
    echo "model: {image_size: 320}"
    echo "train_input:"
    echo "  hflip: false"
    if [[ $step == none ]]; then
      echo "  augment: []"
    else
      p=${params[$step]:-}
      # The gate opened (random_black_patches has none: its probability is per patch).
      [[ $step == random_black_patches ]] || p="probability: 1${p:+, $p}"
      echo "  augment: [{$step: {$p}}]"
    fi
  } > "$work/$step.yaml"
  ./build/detseg --threads 2 augment --config "$work/$step.yaml" --out "$work/$step" --count 1 --step 3 > /dev/null
done
"${DETSEG_PYTHON:-.venv/bin/python}" - "$work" "${steps[@]}" <<'PY'
import sys
from PIL import Image, ImageDraw
work, steps = sys.argv[1], sys.argv[2:]
cell, title, cols = 240, 16, 6
rows = (len(steps) + cols - 1) // cols
sheet = Image.new("RGB", (cols * cell, rows * (cell + title)), (40, 40, 40))
draw = ImageDraw.Draw(sheet)
for k, step in enumerate(steps):
    im = Image.open(f"{work}/{step}/augment.png").convert("RGB")
    im = im.crop((4, 22, im.width - 4, im.height - 4))  # the grid's own gap and caption
    im.thumbnail((cell - 4, cell - 4))
    x, y = (k % cols) * cell, (k // cols) * (cell + title)
    sheet.paste(im, (x + 2, y + title))
    draw.text((x + 4, y + 2), "(no step)" if step == "none" else step, fill=(235, 235, 235))
sheet.save("docs/images/augment_steps.jpg", quality=80)
print("wrote docs/images/augment_steps.jpg")
PY
