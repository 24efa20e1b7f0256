#!/usr/bin/env bash
# The model benchmarks (bench_models, bench_two_stage, bench_seg) under several CPU kernel sets, one
# after the other in one run, so each case's ratio against torchvision is read under the kernels an
# AVX-512 CPU picks (native) and under those an AVX2-only CPU picks (avx2: ATen's AVX2 kernels,
# oneDNN up to AVX2). The torchvision side inherits the same variables (one libtorch, one oneDNN).
# Prints each program's output under a header naming the set; the ratio lines are the summary.
#   bash bench/model_kernel_sets.sh [THREADS=2] [ITERS=3] [--sets "native avx2"] [--build DIR]
#       [--programs "bench_models bench_two_stage bench_seg"]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
threads=2
iters=3
sets="native avx2"
build=$here/build
programs="bench_models bench_two_stage bench_seg"
positional=()
while (($#)); do
  case $1 in
    --sets) sets=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --programs) programs=$2; shift 2 ;;
    *) positional+=("$1"); shift ;;
  esac
done
threads=${positional[0]:-$threads}
iters=${positional[1]:-$iters}

kernel_env() {  # set name -> the variables that select it
  case $1 in
    native) echo "" ;;
    avx2) echo "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2" ;;
    avx512) echo "ATEN_CPU_CAPABILITY=avx512 ONEDNN_MAX_CPU_ISA=AVX512_CORE" ;;
    default) echo "ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41" ;;
    *) echo "model_kernel_sets.sh: unknown kernel set $1 (native, avx2, avx512, default)" >&2; exit 2 ;;
  esac
}

"$build/detseg" info | grep '^machine'
echo "date $(date -u +%F), $threads threads, $iters iterations, load $(cut -d' ' -f1-3 /proc/loadavg)"
for program in $programs; do
  for set in $sets; do
    vars=$(kernel_env "$set")
    echo "=== $program, kernel set $set${vars:+ ($vars)}"
    # shellcheck disable=SC2086  # vars is a list of NAME=VALUE words
    env $vars "$build/bench/$program" "$threads" "$iters"
  done
done
