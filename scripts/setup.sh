#!/usr/bin/env bash
# Installs what detseg needs to build, test and benchmark. Idempotent: what is present is skipped,
# so a second run costs a few seconds.
#   scripts/setup.sh            Debian build packages + LibTorch 2.11 (pip's torch wheel) in a venv
#   scripts/setup.sh --peers    also the peers used only by tests and benchmarks (torchvision,
#                               pycocotools, faster-coco-eval, onnx, onnxruntime, tensorboard: its
#                               reader checks our PR-curve summaries), in the same venv
#   scripts/setup.sh --ultralytics  the peers and Ultralytics (YOLO11, for bench/bench_learning.sh
#                               only; pip keeps the venv's torch), tests never import it
#
# The venv lives outside the clone, one per torch version, so every clone (CI clones afresh each
# run) reuses it: $DETSEG_VENV, default ~/.cache/detseg/venv-torch-2.11.0. `.venv` in the clone is a
# symlink to it; CMake asks `.venv/bin/python` for torch.utils.cmake_prefix_path. Users with their
# own PyTorch skip all this and configure with -DCMAKE_PREFIX_PATH or -DTorch_DIR (README).
set -euo pipefail
cd "$(dirname "$0")/.."

torch_version=2.11.0
ultralytics=ultralytics==8.4.190
peers=(torchvision==0.26.0 pycocotools==2.0.11 faster-coco-eval==1.8.0 onnx onnxruntime numpy tensorboard==2.21.0)

packages=(
  build-essential cmake ninja-build ccache pkg-config python3-venv
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev libpng-dev libjpeg62-turbo-dev
  libopencv-videoio-dev  # predict on videos and streams: only detseg's video module links it (CMakeLists.txt)
  libyaml-cpp-dev libsimdjson-dev nlohmann-json3-dev libcli11-dev libcurl4-openssl-dev libtinyxml2-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang llvm libclang-rt-dev  # the sanitizer build and libFuzzer (scripts/sanitize.sh, scripts/fuzz.sh)
)
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

venv=${DETSEG_VENV:-$HOME/.cache/detseg/venv-torch-$torch_version}
python=$venv/bin/python
if [[ ! -x $python ]]; then
  mkdir -p "$(dirname "$venv")"
  # pyenv's or the system's python3; the venv pins nothing else about it.
  python3 -m venv "$venv"
fi
if ! "$python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$torch_version')" 2>/dev/null; then
  echo "setup: installing torch==$torch_version into $venv (first time only: a ~3-4 GB download with its CUDA libraries)"
  "$python" -m pip install -q --disable-pip-version-check "torch==$torch_version"
fi
if [[ "${1:-}" == "--peers" || "${1:-}" == "--ultralytics" ]]; then
  if ! "$python" -c "import torchvision, pycocotools, faster_coco_eval, onnx, onnxruntime, numpy, tensorboard" 2>/dev/null; then
    echo "setup: installing the test and benchmark peers (${peers[*]}) into $venv"
    "$python" -m pip install -q --disable-pip-version-check "torch==$torch_version" "${peers[@]}"
  fi
fi
if [[ "${1:-}" == "--ultralytics" ]] && ! "$python" -c "import ultralytics" 2>/dev/null; then
  echo "setup: installing $ultralytics into $venv"
  "$python" -m pip install -q --disable-pip-version-check "torch==$torch_version" "$ultralytics"
fi
# The clone's handle on the shared venv (git-ignored).
if [[ "$(readlink .venv 2>/dev/null)" != "$venv" ]]; then
  rm -rf .venv
  ln -s "$venv" .venv
fi
echo "setup: all packages present (torch $torch_version in $venv)"
