// Implements: the one probe for the Python peer that makes parity fixtures at test time: the venv's
// python (DETSEG_PYTHON, set by CMake: .venv/bin/python from scripts/setup.sh --peers) with torch
// 2.11 and torchvision 0.26. Tests skip with a message naming it when it is absent.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include "test_paths.h"

namespace detseg::test {

inline const std::string kPeerPython = DETSEG_PYTHON;

inline bool torchvision_available() {
  static const bool available =
      std::filesystem::exists(kPeerPython) &&
      std::system((kPeerPython + " -c 'import torchvision' >/dev/null 2>&1").c_str()) == 0;
  return available;
}

// torch with onnx and onnxruntime: the ONNX export and its check.
inline bool onnx_available() {
  static const bool available =
      std::filesystem::exists(kPeerPython) &&
      std::system((kPeerPython + " -c 'import torch, onnx, onnxruntime' >/dev/null 2>&1").c_str()) == 0;
  return available;
}

}  // namespace detseg::test
