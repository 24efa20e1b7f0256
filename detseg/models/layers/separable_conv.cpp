// Implements: depthwise-separable conv with optional batch norm and activation.
#include "detseg/models/layers/separable_conv.h"

#include <ATen/ATen.h>

namespace detseg {

SeparableConvImpl::SeparableConvImpl(const SeparableConvOptions& options_) : options(options_) {
  conv_dw = register_module(
      "conv_dw", make_conv2d(options.in(), options.in(), options.kernel(), 1, false, options.in()));
  conv_pw = register_module("conv_pw", make_conv2d(options.in(), options.out(), 1, 1, true));
  if (options.norm()) {
    bn = register_module(
        "bn", Norm2d(Norm2dOptions(options.out()).eps(options.eps()).momentum(options.momentum())));
  }
}

at::Tensor SeparableConvImpl::forward(const at::Tensor& x) {
  at::Tensor y = conv_pw->forward(conv_dw->forward(x));
  if (bn) y = bn->forward(y);
  return apply_activation_(y, options.activation());
}

}  // namespace detseg
