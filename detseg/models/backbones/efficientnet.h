// Implements: EfficientNet-B0..B7 (MBConv, squeeze-excitation, swish, drop-connect, compound
// scaling) as a detection backbone, with torchvision's efficientnet_bN parameter names
// (features.0.*, features.S.B.block.I.*, features.8.*).
#pragma once

#include <torch/arg.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "detseg/models/backbones/backbone.h"
#include "detseg/models/layers/conv_bn_act.h"
#include "detseg/models/layers/squeeze_excite.h"

namespace detseg {

struct EfficientNetOptions {
  explicit EfficientNetOptions(int64_t variant = 0) : variant_(variant) {}
  TORCH_ARG(int64_t, variant);  // 0..7 for B0..B7
  // BN eps; < 0 picks torchvision's choice for the variant (1e-5 for B0-B4, 1e-3 for B5-B7).
  TORCH_ARG(double, bn_eps) = -1.0;
  TORCH_ARG(double, bn_momentum) = 0.1;
  TORCH_ARG(double, drop_connect_rate) = 0.2;  // torchvision stochastic_depth_prob
  // Which of the 7 MBConv stages (1..7) to return. Detection: {3, 5, 7} = strides 8, 16, 32.
  TORCH_ARG(std::vector<int64_t>, returned_stages) = std::vector<int64_t>{3, 5, 7};
  // Build features.8 (the 1x1 conv to 4x the last width) too; detection does not use it.
  TORCH_ARG(bool, head_conv) = false;
};

// Compound-scaled settings of a variant.
struct EfficientNetScaling {
  double width_mult, depth_mult;
  int64_t resolution;
};
EfficientNetScaling efficientnet_scaling(int64_t variant);

// Mobile inverted bottleneck: [expand 1x1] -> depthwise kxk -> SE -> project 1x1 (+ residual).
// Children block.I are numbered as torchvision's (expand absent when the ratio is 1).
class MBConvImpl : public torch::nn::Module {
 public:
  MBConvImpl(int64_t in, int64_t out, int64_t expand_ratio, int64_t kernel, int64_t stride,
             double drop_connect_p, double eps, double momentum);
  at::Tensor forward(const at::Tensor& x);

  bool residual;
  double drop_connect_p;
  ConvBnAct expand{nullptr}, depthwise{nullptr}, project{nullptr};
  SqueezeExcite se{nullptr};
};
TORCH_MODULE(MBConv);

class EfficientNetImpl : public BackboneImpl {
 public:
  explicit EfficientNetImpl(const EfficientNetOptions& options);
  std::vector<at::Tensor> forward(const at::Tensor& images) override;
  std::vector<FeatureSpec> feature_specs() const override;

  EfficientNetOptions options;
  ConvBnAct stem{nullptr}, head{nullptr};
  std::vector<std::vector<MBConv>> stages;  // features.1 .. features.7
  std::vector<int64_t> stage_channels, stage_strides;
};
TORCH_MODULE(EfficientNet);

}  // namespace detseg
