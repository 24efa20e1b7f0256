#!/usr/bin/env bash
# BCCD's VOC train and test splits as COCO files, classes in the demo's order (RBC, WBC, Platelets),
# for the benchmarks that train on BCCD (bench_learning.sh, step_rounds.sh).
#   bash bench/data/bccd_to_coco.sh DETSEG_BIN BCCD_VOC_DIR OUT_DIR  ->  OUT_DIR/{train,test}.json
set -euo pipefail
bin=$1; voc=$2; out=$3
printf 'RBC\nWBC\nPlatelets\n' > "$out/labels.txt"
for split in train test; do
  "$bin" -q convert voc "$voc" --split $split --label-map "$out/labels.txt" -o "$out/$split.json" > /dev/null
done
