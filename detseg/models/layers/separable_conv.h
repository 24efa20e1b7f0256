// Implements: depthwise-separable conv (depthwise k x k, pointwise 1 x 1 with bias, optional BN),
// the building block of EfficientDet's BiFPN and heads.
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include "detseg/models/layers/conv_bn_act.h"

namespace detseg {

struct SeparableConvOptions {
  SeparableConvOptions(int64_t in, int64_t out) : in_(in), out_(out) {}
  TORCH_ARG(int64_t, in);
  TORCH_ARG(int64_t, out);
  TORCH_ARG(int64_t, kernel) = 3;
  TORCH_ARG(bool, norm) = true;  // BN after the pointwise conv ("bn" child)
  TORCH_ARG(double, eps) = 1e-3;
  TORCH_ARG(double, momentum) = 0.01;
  TORCH_ARG(Activation, activation) = Activation::kNone;
};

// Children: conv_dw (no bias), conv_pw (bias), bn (when norm).
class SeparableConvImpl : public torch::nn::Module {
 public:
  explicit SeparableConvImpl(const SeparableConvOptions& options);
  at::Tensor forward(const at::Tensor& x);  // [N, in, H, W] -> [N, out, H, W]

  SeparableConvOptions options;
  torch::nn::Conv2d conv_dw{nullptr}, conv_pw{nullptr};
  Norm2d bn{nullptr};
};
TORCH_MODULE(SeparableConv);

}  // namespace detseg
