#!/usr/bin/env bash
# Rebuilds the bundled demo set from ../shared/data/bccd with detseg's own converter:
# the first 60 ids of bccd's train list and the first 20 of its val list.
#   assets/demo/make_demo.sh [path/to/detseg]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../.."
bccd="${BCCD_DIR:-$root/../shared/data/bccd}"
detseg="${1:-$root/build/detseg}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/Annotations" "$tmp/JPEGImages" "$tmp/ImageSets/Main" "$here/images"
head -n 60 "$bccd/BCCD/ImageSets/Main/train.txt" > "$tmp/ImageSets/Main/train.txt"
head -n 20 "$bccd/BCCD/ImageSets/Main/val.txt" > "$tmp/ImageSets/Main/val.txt"
rm -f "$here"/images/*.jpg
for id in $(cat "$tmp/ImageSets/Main/train.txt" "$tmp/ImageSets/Main/val.txt"); do
  cp "$bccd/BCCD/Annotations/$id.xml" "$tmp/Annotations/"
  cp "$bccd/BCCD/JPEGImages/$id.jpg" "$tmp/JPEGImages/"
  cp "$bccd/BCCD/JPEGImages/$id.jpg" "$here/images/"
done
printf 'RBC\nWBC\nPlatelets\n' > "$here/labels.txt"
"$detseg" convert voc "$tmp" --split train --label-map "$here/labels.txt" -o "$here/train.json"
"$detseg" convert voc "$tmp" --split val --label-map "$here/labels.txt" -o "$here/val.json"
cp "$bccd/LICENSE" "$here/LICENSE"
