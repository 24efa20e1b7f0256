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
ccache --zero-stats >/dev/null 2>&1 || true
ninja -C build -j "$(nproc)" "$@"
# A fresh clone should build from the compiler cache in minutes (CMakeLists.txt, the launcher).
if command -v ccache >/dev/null; then
  ccache --print-stats 2>/dev/null | awk '$1 ~ /^(direct_cache_hit|preprocessed_cache_hit)$/ {h += $2} $1 == "cache_miss" {m = $2}
    END {print "build.sh: compiler cache " h + 0 " hits, " m + 0 " misses"}'
fi
