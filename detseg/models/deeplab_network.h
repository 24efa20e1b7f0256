// Implements: DeepLabv3 / DeepLabv3+'s network: an atrous backbone (ResNet-18..101, MobileNetV2,
// Xception-65)
// at output stride 8, 16 or 32 -> ASPP -> [DeepLabv3+ decoder with the stride-4 features] -> 1x1
// classifier. Names: backbone.* as torchvision's backbones, aspp.* as torchvision's
// DeepLabHead's classifier.0.*, decoder.*, classifier.*. Logits come out at the decoder's stride
// (4) or the output stride without a decoder; losses and upsampling live in the meta-arch.
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include <memory>
#include <string>
#include <vector>

#include "detseg/models/backbones/backbone.h"
#include "detseg/models/heads/deeplab_head.h"
#include "detseg/models/layers/conv_bn_act.h"

namespace detseg {

struct DeepLabNetworkOptions {
  explicit DeepLabNetworkOptions(int64_t num_classes = 21) : num_classes_(num_classes) {}
  TORCH_ARG(int64_t, num_classes);
  TORCH_ARG(std::string, backbone) = "resnet50";  // resnet18/34/50/101, mobilenet_v2, xception65
  TORCH_ARG(int64_t, output_stride) = 16;         // 8, 16 or 32
  TORCH_ARG(bool, decoder) = true;                // DeepLabv3+ (false: DeepLabv3)
  TORCH_ARG(bool, frozen_bn) = false;             // backbone batch norm frozen
  TORCH_ARG(int64_t, aspp_channels) = 256;
  TORCH_ARG(double, aspp_dropout) = 0.1;
  TORCH_ARG(bool, image_pooling) = true;          // ASPP's image-level branch
  TORCH_ARG(int64_t, low_level_channels) = 48;
  TORCH_ARG(int64_t, decoder_channels) = 256;
  // Without the decoder: a 3x3 conv + BN + ReLU after the ASPP (torchvision's DeepLabHead).
  TORCH_ARG(bool, head_conv) = false;
};

// The layer names DeepLab treats as "last layers" (everything after the backbone): the gradient
// multiplier and initialize_last_layer apply to them.
std::vector<std::string> deeplab_last_layers();

class DeepLabNetworkImpl : public torch::nn::Module {
 public:
  explicit DeepLabNetworkImpl(const DeepLabNetworkOptions& options);
  // images: [N, 3, H, W] normalised -> logits [N, K, ~H/s, ~W/s], s = 4 (decoder) or output_stride.
  at::Tensor forward(const at::Tensor& images);
  // Backbone maps: {stride-4 low-level, last} (the low-level one only with the decoder).
  std::vector<at::Tensor> features(const at::Tensor& images);
  int64_t logits_stride() const;

  DeepLabNetworkOptions options;
  std::shared_ptr<BackboneImpl> backbone;
  Aspp aspp{nullptr};
  DeepLabDecoder decoder{nullptr};
  ConvBnAct head_conv{nullptr};
  torch::nn::Conv2d classifier{nullptr};
};
TORCH_MODULE(DeepLabNetwork);

}  // namespace detseg
