// Implements: drop-connect (stochastic depth, torchvision "row" mode) for residual branches.
#include "detseg/models/layers/drop_connect.h"

#include <ATen/ATen.h>

namespace detseg {

at::Tensor drop_connect(const at::Tensor& x, double p, bool training) {
  TORCH_CHECK(p >= 0.0 && p < 1.0, "drop_connect: p must be in [0, 1), got ", p);
  if (!training || p == 0.0 || x.numel() == 0) return x;
  std::vector<int64_t> shape(x.dim(), 1);
  shape[0] = x.size(0);
  const double survival = 1.0 - p;
  at::Tensor keep = at::empty(shape, x.options()).bernoulli_(survival).div_(survival);
  return x * keep;
}

}  // namespace detseg
