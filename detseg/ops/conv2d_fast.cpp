#include "detseg/ops/conv2d_fast.h"

#include "detseg/ops/tracing.h"

#include <algorithm>
#include <array>

namespace detseg {
namespace {

bool all_equal(at::IntArrayRef values, int64_t v) {
  return !values.empty() && std::all_of(values.begin(), values.end(), [v](int64_t e) { return e == v; });
}

}  // namespace

bool centre_tap_applies(const at::Tensor& x, const at::Tensor& weight, at::IntArrayRef stride,
                        at::IntArrayRef padding, at::IntArrayRef dilation) {
  return x.dim() == 4 && weight.dim() == 4 && weight.size(2) == 3 && weight.size(3) == 3 && dilation.size() == 2 &&
         padding.size() == 2 && all_equal(stride, 1) && padding[0] == dilation[0] && padding[1] == dilation[1] &&
         dilation[0] >= x.size(2) && dilation[1] >= x.size(3);
}

double valid_tap_fraction(const at::Tensor& x, at::IntArrayRef dilation) {
  // Along one axis of size n, the taps at -d, 0, +d read n - d, n and n - d inside pixels.
  auto axis = [](int64_t n, int64_t d) { return (n + 2.0 * std::max<int64_t>(0, n - d)) / (3.0 * n); };
  return axis(x.size(2), dilation[0]) * axis(x.size(3), dilation[1]);
}

bool sparse_taps_apply(const at::Tensor& x, const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
                       at::IntArrayRef dilation, int64_t groups) {
  return x.dim() == 4 && weight.dim() == 4 && weight.size(2) == 3 && weight.size(3) == 3 && groups == 1 &&
         dilation.size() == 2 && padding.size() == 2 && all_equal(stride, 1) && padding[0] == dilation[0] &&
         padding[1] == dilation[1] && (dilation[0] > 1 || dilation[1] > 1) && x.layout() == at::kStrided &&
         valid_tap_fraction(x, dilation) <= 0.6;
}

at::Tensor conv2d_sparse_taps(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                              at::IntArrayRef dilation) {
  const int64_t h = x.size(2), w = x.size(3);
  const std::array<int64_t, 2> ones = {1, 1}, zeros = {0, 0};
  auto tap = [&](const at::Tensor& input, int64_t ty, int64_t tx, const c10::optional<at::Tensor>& b) {
    return at::conv2d(input, weight.slice(2, ty, ty + 1).slice(3, tx, tx + 1), b, at::IntArrayRef(ones),
                      at::IntArrayRef(zeros), at::IntArrayRef(ones), 1);
  };
  at::Tensor y = tap(x, 1, 1, bias);  // the centre tap sees every output pixel
  for (int64_t ty = 0; ty < 3; ++ty) {
    for (int64_t tx = 0; tx < 3; ++tx) {
      if (ty == 1 && tx == 1) continue;
      // Output pixels (r, c) whose tap input (r + oy, c + ox) lies inside the map.
      const int64_t oy = (ty - 1) * dilation[0], ox = (tx - 1) * dilation[1];
      const int64_t r0 = std::max<int64_t>(0, -oy), r1 = std::min(h, h - oy);
      const int64_t c0 = std::max<int64_t>(0, -ox), c1 = std::min(w, w - ox);
      if (r0 >= r1 || c0 >= c1) continue;
      const at::Tensor part = tap(x.slice(2, r0 + oy, r1 + oy).slice(3, c0 + ox, c1 + ox), ty, tx, c10::nullopt);
      y.slice(2, r0, r1).slice(3, c0, c1).add_(part);
    }
  }
  return y;
}

at::Tensor conv2d_fast(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                       at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  if (tracing()) return at::conv2d(x, weight, bias, stride, padding, dilation, groups);
  if (centre_tap_applies(x, weight, stride, padding, dilation)) {
    const std::array<int64_t, 2> ones = {1, 1}, zeros = {0, 0};
    return at::conv2d(x, weight.slice(2, 1, 2).slice(3, 1, 2), bias, at::IntArrayRef(ones), at::IntArrayRef(zeros),
                      at::IntArrayRef(ones), groups);
  }
  if (sparse_taps_apply(x, weight, stride, padding, dilation, groups))
    return conv2d_sparse_taps(x, weight, bias, dilation);
  return at::conv2d(x, weight, bias, stride, padding, dilation, groups);
}

}  // namespace detseg
