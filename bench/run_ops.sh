#!/bin/bash
# Times detseg's ops against torchvision's on the same inputs and thread count, and prints ratios
# (detseg time / torchvision time; < 1 means detseg is faster).
#   bench/run_ops.sh [build_dir] [threads] [--skip-100k]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
threads=${2:-2}
extra=${3:-}
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
"${DETSEG_PYTHON:-$root/.venv/bin/python}" "$root/bench/peers/ops_peer.py" "$data" --threads "$threads" $extra > /dev/null
"$build/bench/bench_ops" "$data" "$threads"
