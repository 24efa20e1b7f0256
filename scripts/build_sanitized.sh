#!/usr/bin/env bash
# Configures (once) and builds the torch-free parts of detseg with clang's ASan + UBSan into
# build-fuzz/ (fuzz/CMakeLists.txt): the fuzz harnesses and the torch-free test programs. Used by
# scripts/fuzz.sh and scripts/sanitize.sh; needs no LibTorch.
#   scripts/build_sanitized.sh [ninja targets...]            e.g. fuzzers, sanitized_tests
#   scripts/build_sanitized.sh --torch [ninja targets...]    the harnesses of the LibTorch readers
#                                                             (pth, safetensors, checkpoint) into
#                                                             build-fuzz-torch/, LibTorch from .venv
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build-fuzz
options=()
if [[ ${1:-} == --torch ]]; then
  shift
  dir=build-fuzz-torch
  options=(-DDETSEG_TORCH_FUZZERS=ON -DDETSEG_SANITIZED_TESTS=OFF)
  [[ -x .venv/bin/python ]] || { echo "build_sanitized: --torch needs LibTorch: run scripts/setup.sh"; exit 2; }
fi
for tool in clang++ llvm-symbolizer; do
  command -v "$tool" >/dev/null || { echo "build_sanitized: $tool not found: run scripts/setup.sh (clang, llvm, libclang-rt-dev)"; exit 2; }
done
if [[ ! -f $dir/build.ninja ]]; then
  cmake -S fuzz -B "$dir" -G Ninja -DCMAKE_CXX_COMPILER=clang++ "${options[@]}" >/dev/null
fi
# DETSEG_JOBS: fewer jobs than cores when something else is building.
ninja -C "$dir" --quiet -j "${DETSEG_JOBS:-$(nproc)}" "$@"
