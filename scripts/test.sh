#!/usr/bin/env bash
# The test command: sets everything up on a fresh Debian 12 machine, builds, runs every test.
#   scripts/test.sh [ctest args...]     e.g. scripts/test.sh -R Coco
# Without ctest arguments it then runs the tests that train or compare numbers under two other
# CPUs' kernel sets (scripts/test_kernel_sets.sh), and the hostile-input checks (docs/fuzzing.md): the torch-free
# code's tests under ASan+UBSan, and a short run of every torch-free fuzz harness (its saved
# reproducers, its seeds, 20 s of fuzzing, one harness per core); together a few minutes on 2
# cores.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's wall time, so a CI log shows where its limit went.
phase() { echo "test.sh: $1 done after ${SECONDS} s"; }
bash scripts/setup.sh --peers
phase setup
bash scripts/build.sh
phase build
(cd build && ctest --output-on-failure -j "$(nproc)" "$@")
grep -h '^\[ measured \]' build/Testing/Temporary/LastTest.log | sed 's|^|native |' || true
phase ctest
if (($# == 0)); then
  bash scripts/test_kernel_sets.sh  # the numerically sensitive tests again, under two other CPUs' kernels
  phase "kernel sets"
  bash scripts/sanitize.sh
  phase sanitize
  bash scripts/fuzz.sh --seconds 20 --jobs "$(nproc)"
  phase fuzz
fi
