// Implements: squeeze-and-excitation gate.
#include "detseg/models/layers/squeeze_excite.h"

#include <ATen/ATen.h>

namespace detseg {

SqueezeExciteImpl::SqueezeExciteImpl(int64_t channels, int64_t squeeze_channels,
                                     Activation activation_)
    : activation(activation_) {
  fc1 = register_module("fc1", make_conv2d(channels, squeeze_channels, 1));
  fc2 = register_module("fc2", make_conv2d(squeeze_channels, channels, 1));
}

at::Tensor SqueezeExciteImpl::forward(const at::Tensor& x) {
  at::Tensor s = at::adaptive_avg_pool2d(x, {1, 1});  // [N, C, 1, 1]
  s = fc1->forward(s);
  s = apply_activation_(s, activation);
  s = fc2->forward(s).sigmoid_();
  return x * s;
}

}  // namespace detseg
