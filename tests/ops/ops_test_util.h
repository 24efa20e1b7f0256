// Implements: small helpers shared by the ops tests (tensor literals, approximate comparison).
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "detseg/ops/anchors.h"

namespace detseg::testing {

inline at::Tensor F(std::vector<float> v, std::vector<int64_t> shape) {
  return at::tensor(v, at::kFloat).reshape(shape);
}
inline at::Tensor L(std::vector<int64_t> v) { return at::tensor(v, at::kLong); }
inline std::vector<int64_t> to_vec(const at::Tensor& t) {
  auto c = t.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}
// Largest |a - b| relative to the largest |b| (conv outputs are sums of many terms).
inline double relative_error(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max().clamp_min(1e-12)).item<double>();
}
inline void expect_close(const at::Tensor& got, const at::Tensor& want, double tol = 1e-5) {
  ASSERT_EQ(got.sizes(), want.sizes());
  auto diff = (got.to(at::kDouble) - want.to(at::kDouble)).abs();
  double worst = diff.numel() ? diff.max().item<double>() : 0.0;
  EXPECT_LE(worst, tol) << "got\n" << got << "\nwant\n" << want;
}

// Levels 3-4 of a 32 x 32 image, one square anchor of the stride's size per cell: 4x4 + 2x2.
inline MultiLevelAnchorOptions two_level_anchor_options() {
  MultiLevelAnchorOptions o;
  o.min_level = 3;
  o.max_level = 4;
  o.num_scales = 1;
  o.aspect_ratios = {{1.0, 1.0}};
  o.anchor_scale = 1.0;
  o.image_height = o.image_width = 32;
  return o;
}

}  // namespace detseg::testing
