// Implements: squeeze-and-excitation (global pool -> 1x1 reduce -> act -> 1x1 expand -> sigmoid
// gate), named like torchvision's SqueezeExcitation (fc1, fc2).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include "detseg/models/layers/conv_bn_act.h"

namespace detseg {

class SqueezeExciteImpl : public torch::nn::Module {
 public:
  SqueezeExciteImpl(int64_t channels, int64_t squeeze_channels,
                    Activation activation = Activation::kSiLU);
  at::Tensor forward(const at::Tensor& x);  // x: [N, C, H, W] -> same, scaled per channel

  Activation activation;
  torch::nn::Conv2d fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(SqueezeExcite);

}  // namespace detseg
