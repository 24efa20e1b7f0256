// Implements: drop-connect (stochastic depth, torchvision "row" mode) for residual branches.
#pragma once

#include <ATen/core/Tensor.h>

namespace detseg {

// In training, zeroes each sample's residual branch with probability p and scales survivors by
// 1 / (1 - p); identity in eval or when p == 0.  x: [N, ...]
at::Tensor drop_connect(const at::Tensor& x, double p, bool training);

}  // namespace detseg
