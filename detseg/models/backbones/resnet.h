// Implements: ResNet-18/34/50/101 (torchvision layout and parameter names) as a detection backbone.
#pragma once

#include <torch/arg.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>

#include "detseg/models/backbones/backbone.h"
#include "detseg/models/layers/conv_bn_act.h"

namespace detseg {

struct ResNetOptions {
  explicit ResNetOptions(int64_t depth = 50) : depth_(depth) {}
  TORCH_ARG(int64_t, depth);               // 18, 34, 50 or 101
  TORCH_ARG(bool, frozen_bn) = true;       // torchvision detection default: FrozenBatchNorm2d
  // Stages frozen from the stem: 0 none, 1 stem (conv1, bn1), 2 + layer1, ..., 5 everything.
  // torchvision's trainable_backbone_layers = 5 - frozen_stages (default 3 -> frozen_stages 2).
  TORCH_ARG(int64_t, frozen_stages) = 2;
  // Which of layer1..layer4 (1..4) to return; torchvision's returned_layers. RetinaNet: {2, 3, 4}.
  TORCH_ARG(std::vector<int64_t>, returned_layers) = std::vector<int64_t>{2, 3, 4};
  // torchvision's replace_stride_with_dilation for layer2..layer4: a stage marked true keeps the
  // resolution and dilates its 3x3 convs instead (DeepLab's atrous ResNet). Output stride 16:
  // {false, false, true}; 8: {false, true, true}.
  TORCH_ARG(std::vector<bool>, replace_stride_with_dilation) = std::vector<bool>{false, false, false};
};

// One residual block (BasicBlock for 18/34, Bottleneck for 50/101). Children: conv1, bn1, conv2,
// bn2, [conv3, bn3], [downsample.0 conv, downsample.1 norm].
class ResNetBlockImpl : public torch::nn::Module {
 public:
  // `dilation` applies to the 3x3 convs (padding = dilation), as torchvision's Bottleneck.
  ResNetBlockImpl(int64_t in, int64_t planes, int64_t stride, bool bottleneck, bool frozen_bn,
                  int64_t dilation = 1);
  at::Tensor forward(const at::Tensor& x);

  bool bottleneck;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  Norm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  torch::nn::Sequential downsample{nullptr};
  torch::nn::Conv2d down_conv{nullptr};
  Norm2d down_norm{nullptr};
};
TORCH_MODULE(ResNetBlock);

class ResNetImpl : public BackboneImpl {
 public:
  explicit ResNetImpl(const ResNetOptions& options);
  std::vector<at::Tensor> forward(const at::Tensor& images) override;
  std::vector<FeatureSpec> feature_specs() const override;
  // Applies frozen_stages: requires_grad(false) on the stem and the first stages.
  void apply_freezing();

  ResNetOptions options;
  torch::nn::Conv2d conv1{nullptr};
  Norm2d bn1{nullptr};
  std::vector<std::vector<ResNetBlock>> stages;  // layer1..layer4
  std::vector<int64_t> stage_channels;
  std::vector<int64_t> stage_strides;  // output stride after each stage (dilation keeps it)
};
TORCH_MODULE(ResNet);

}  // namespace detseg
