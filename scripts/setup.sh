#!/usr/bin/env bash
# Installs every Debian package detseg needs to build, test and benchmark. Idempotent:
# packages already present are skipped, so a second run costs a few seconds.
#   scripts/setup.sh            build + test dependencies
#   scripts/setup.sh --peers    also Debian's python3 torch/torchvision (benchmark peers, fixture makers)
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev libopenblas0-pthread
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev
  libyaml-cpp-dev libsimdjson-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
)
if [[ "${1:-}" == "--peers" ]]; then
  packages+=(python3-torch python3-torchvision python3-numpy)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: all packages present"
