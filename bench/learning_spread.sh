#!/usr/bin/env bash
# What a training config scores under each CPU kernel set: ATen and oneDNN choose their vector
# kernels from the CPU (ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA lower the choice), each sums in its
# own order, and a learnt model's AP moves with it, as it does with the thread count and the seed.
# Trains CONFIG with `detseg train` and scores it with `detseg eval` for every kernel set x thread
# count x seed, then prints one line per run and the range of each figure. The learning tests'
# floors (tests/fixtures/learning/*.yaml) come from this.
#   bash bench/learning_spread.sh CONFIG [--seeds "3 4"] [--threads "2 1"] [--sets "native default avx2 avx"] [--set k=v ...]
# Kernel sets: native (none set), default (ATEN default + oneDNN SSE41), avx2 (avx2 + AVX2),
# avx (ATEN avx2 + oneDNN AVX: no FMA), avx512 (avx512 + AVX512_CORE: only on a CPU that has it).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
config=$1; shift
seeds="3"; threads="2"; sets="native default avx"; overrides=()
while (($#)); do
  case $1 in
    --seeds) seeds=$2; shift 2;;
    --threads) threads=$2; shift 2;;
    --sets) sets=$2; shift 2;;
    --set) overrides+=(--set "$2"); shift 2;;
    *) echo "unknown argument $1" >&2; exit 2;;
  esac
done
bin=${DETSEG_BIN:-$here/build/detseg}
out=$(mktemp -d /tmp/detseg_learning_spread.XXXXXX)
"$bin" info | grep '^machine'
echo "config $config; runs in $out"
for set in $sets; do
  case $set in
    native) env=();;
    default) env=(ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41);;
    avx2) env=(ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2);;
    avx) env=(ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX);;
    avx512) env=(ATEN_CPU_CAPABILITY=avx512 ONEDNN_MAX_CPU_ISA=AVX512_CORE);;
    *) echo "unknown kernel set $set" >&2; exit 2;;
  esac
  for t in $threads; do
    for seed in $seeds; do
      run=$out/$set-t$t-s$seed
      env "${env[@]}" "$bin" -q --threads "$t" train --config "$config" --model-dir "$run" --set train.seed="$seed" \
        "${overrides[@]}" > "$run.train.log" 2>&1 || { echo "$set t$t seed $seed: train failed ($run.train.log)"; continue; }
      env "${env[@]}" "$bin" -q --threads "$t" eval --config "$config" --model-dir "$run" --json "$run.json" \
        "${overrides[@]}" > "$run.eval.log" 2>&1 || { echo "$set t$t seed $seed: eval failed ($run.eval.log)"; continue; }
      "${DETSEG_PYTHON:-$here/.venv/bin/python}" - "$run.json" "$set t$t seed $seed" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
if "stats" in j:
    line = f"AP {j['stats'][0]:.4f} AP50 {j['stats'][1]:.4f}"
    if "segm_stats" in j: line += f" segm_AP {j['segm_stats'][0]:.4f} segm_AP50 {j['segm_stats'][1]:.4f}"
else:
    line = f"mIoU {j['mIoU']:.4f} pixel_accuracy {j['pixel_accuracy']:.4f}"
print(f"{sys.argv[2]:24s} {line}")
PY
    done
  done
done | tee "$out/runs.txt"
"${DETSEG_PYTHON:-$here/.venv/bin/python}" - "$out/runs.txt" <<'PY'
import re, sys
values = {}
for line in open(sys.argv[1]):
    for key, v in re.findall(r"(\w+) ([0-9.]+)(?= |$)", line.split(None, 3)[-1]):
        values.setdefault(key, []).append(float(v))
for key, v in values.items():
    print(f"{key}: {min(v):.4f} - {max(v):.4f} over {len(v)} runs")
PY
