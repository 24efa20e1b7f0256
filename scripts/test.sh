#!/usr/bin/env bash
# The test command: sets everything up on a fresh Debian 12 machine, builds, runs every test.
#   scripts/test.sh [ctest args...]     e.g. scripts/test.sh -R Coco
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --peers
bash scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" --timeout 900 "$@"
