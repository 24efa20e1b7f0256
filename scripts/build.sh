#!/usr/bin/env bash
# Installs what is missing (scripts/setup.sh), configures and builds detseg in build/.
#   scripts/build.sh [ninja targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
# Two parallel jobs peak at ~6 GiB with torch headers; more jobs than cores only thrash.
ninja -C build -j "$(nproc)" "$@"
