// Implements: small helpers shared by the data tests: synthetic examples (and, from
// data_test_files.h, temp folders, error messages, a YOLO copy of BCCD).
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data_test_files.h"
#include "detseg/core/error.h"
#include "detseg/data/example.h"

namespace detseg::datatest {

// An h x w example whose pixel (c, y, x) = (x + 3y + 50c) % 256, with the given xyxy boxes.
inline Example synthetic_example(int64_t h, int64_t w, const std::vector<std::vector<float>>& boxes = {}) {
  Example ex;
  auto xs = at::arange(w, at::kLong).view({1, 1, w});
  auto ys = at::arange(h, at::kLong).view({1, h, 1});
  auto cs = at::arange(3, at::kLong).view({3, 1, 1});
  ex.image = ((xs + ys * 3 + cs * 50) % 256).to(at::kByte).contiguous();
  ex.original_height = h;
  ex.original_width = w;
  const int64_t n = static_cast<int64_t>(boxes.size());
  ex.boxes = at::zeros({n, 4}, at::kFloat);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < 4; ++k) ex.boxes[i][k] = boxes[static_cast<size_t>(i)][static_cast<size_t>(k)];
  ex.classes = at::arange(n, at::kLong);
  ex.iscrowd = at::zeros({n}, at::kBool);
  return ex;
}

}  // namespace detseg::datatest
