// Implements: MobileNetV2 (torchvision layout and parameter names: features.0 .. features.17) as a
// dense-prediction backbone, with DeepLab's atrous option: once the output stride is reached,
// later strides become 1 and the depthwise convs dilate instead (TF-slim's mobilenet rule).
// features.18 (the 1x1 conv to 1280 channels) is not built: DeepLab uses the 320-channel map.
#pragma once

#include <torch/arg.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "detseg/models/backbones/backbone.h"
#include "detseg/models/layers/conv_bn_act.h"

namespace detseg {

struct MobileNetV2Options {
  TORCH_ARG(int64_t, output_stride) = 32;  // 8, 16 or 32
  TORCH_ARG(bool, frozen_bn) = false;
  // Which features.N outputs to return (1..17), finest first. DeepLab: {3, 17} = stride 4 (24
  // channels, the decoder's low-level features) and the last block (320 channels).
  TORCH_ARG(std::vector<int64_t>, returned_blocks) = std::vector<int64_t>{3, 17};
};

// Inverted residual: [expand 1x1 ReLU6] -> depthwise 3x3 ReLU6 -> project 1x1 + BN (+ identity).
// Children conv.0, conv.1, ... numbered as torchvision's (no expand conv when the ratio is 1).
class InvertedResidualImpl : public torch::nn::Module {
 public:
  InvertedResidualImpl(int64_t in, int64_t out, int64_t stride, int64_t expand_ratio, int64_t dilation,
                       bool frozen_bn);
  at::Tensor forward(const at::Tensor& x);

  bool residual;
  ConvBnAct expand{nullptr}, depthwise{nullptr};
  torch::nn::Conv2d project{nullptr};
  Norm2d project_bn{nullptr};
};
TORCH_MODULE(InvertedResidual);

class MobileNetV2Impl : public BackboneImpl {
 public:
  explicit MobileNetV2Impl(const MobileNetV2Options& options);
  std::vector<at::Tensor> forward(const at::Tensor& images) override;
  std::vector<FeatureSpec> feature_specs() const override;

  MobileNetV2Options options;
  ConvBnAct stem{nullptr};                // features.0
  std::vector<InvertedResidual> blocks;   // features.1 .. features.17
  std::vector<int64_t> block_channels, block_strides;  // per features.N (index N - 1)
};
TORCH_MODULE(MobileNetV2);

}  // namespace detseg
