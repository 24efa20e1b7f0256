#!/usr/bin/env bash
# Runs the tests that train or compare computed numbers (ctest label "numeric") again under other
# CPUs' kernel sets, on this machine: ATen and oneDNN pick their vector kernels from the CPU at
# start-up, and each set sums floats in its own order, so a learning test that passes only with
# this machine's kernels would fail on a user's. The sets, besides the native one that the full
# ctest run used:
#   ATEN_CPU_CAPABILITY=default  ONEDNN_MAX_CPU_ISA=SSE41   (no vector ISA: any x86-64)
#   ATEN_CPU_CAPABILITY=avx2     ONEDNN_MAX_CPU_ISA=AVX2    (an AVX2 machine; where the native set
#                                                            is that one already, oneDNN's AVX
#                                                            kernels instead, which sum without FMA)
#   scripts/test_kernel_sets.sh [ctest args...]      e.g. -R test_e2e
set -euo pipefail
cd "$(dirname "$0")/.."
native=$(build/detseg info | sed -n 's/^machine //p')
echo "test_kernel_sets: native kernels: $native"
second="avx2 AVX2"
if [[ $native == *"oneDNN ISA avx2;"*"ATen CPU capability AVX2"* ]]; then second="avx2 AVX"; fi
# Both sets run even when the first fails; each ends with the learning tests' measured values.
failed=()
for set in "default SSE41" "$second"; do
  read -r aten onednn <<< "$set"
  echo "test_kernel_sets: ATEN_CPU_CAPABILITY=$aten ONEDNN_MAX_CPU_ISA=$onednn"
  (cd build && ATEN_CPU_CAPABILITY=$aten ONEDNN_MAX_CPU_ISA=$onednn \
     ctest -L numeric --output-on-failure -j "$(nproc)" "$@") || failed+=("$aten/$onednn")
  grep -h '^\[ measured \]' build/Testing/Temporary/LastTest.log | sed "s|^|$aten/$onednn |" || true
done
if ((${#failed[@]})); then
  echo "test_kernel_sets: failed under ${failed[*]}" >&2
  exit 1
fi
