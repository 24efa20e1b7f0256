#!/usr/bin/env bash
# Configures (once) and builds the torch-free parts of detseg with clang's ASan + UBSan into
# build-fuzz/ (fuzz/CMakeLists.txt): the fuzz harnesses and the torch-free test programs. Used by
# scripts/fuzz.sh and scripts/sanitize.sh; needs no LibTorch.
#   scripts/build_sanitized.sh [ninja targets...]    e.g. fuzzers, sanitized_tests
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in clang++ llvm-symbolizer; do
  command -v "$tool" >/dev/null || { echo "build_sanitized: $tool not found: run scripts/setup.sh (clang, llvm, libclang-rt-dev)"; exit 2; }
done
if [[ ! -f build-fuzz/build.ninja ]]; then
  cmake -S fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
fi
# DETSEG_JOBS: fewer jobs than cores when something else is building.
ninja -C build-fuzz --quiet -j "${DETSEG_JOBS:-$(nproc)}" "$@"
