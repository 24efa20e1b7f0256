// Implements: DeepLab's heads. ASPP (atrous spatial pyramid pooling: a 1x1 branch, three dilated
// 3x3 branches, image pooling, then a 1x1 projection) with torchvision's parameter names
// (convs.0..4, project), and DeepLabv3+'s decoder (48-channel projection of the low-level
// features, fused with the upsampled ASPP output by two 3x3 convs).
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "detseg/models/layers/conv_bn_act.h"

namespace detseg {

// DeepLab's atrous rates: {6, 12, 18} at output stride 16, doubled at 8, halved at 32.
std::vector<int64_t> aspp_rates_for_output_stride(int64_t output_stride);

struct AsppOptions {
  AsppOptions(int64_t in, std::vector<int64_t> rates) : in_(in), rates_(std::move(rates)) {}
  TORCH_ARG(int64_t, in);
  TORCH_ARG(std::vector<int64_t>, rates);
  TORCH_ARG(int64_t, channels) = 256;
  TORCH_ARG(double, dropout) = 0.1;  // after the projection, in training (torchvision: 0.5)
  // DeepLab's add_image_level_feature. Its batch norm sees one value per image and channel, so
  // very small batches (2) make its statistics degenerate; it can be left out.
  TORCH_ARG(bool, image_pooling) = true;
};

// torchvision's ASPPPooling: global average -> conv "1" -> norm "2" -> ReLU, broadcast back.
class AsppPoolingImpl : public torch::nn::Module {
 public:
  AsppPoolingImpl(int64_t in, int64_t out);
  at::Tensor forward(const at::Tensor& x);  // [N, in, H, W] -> [N, out, H, W]
  torch::nn::Conv2d conv{nullptr};
  Norm2d norm{nullptr};
};
TORCH_MODULE(AsppPooling);

class AsppImpl : public torch::nn::Module {
 public:
  explicit AsppImpl(const AsppOptions& options);
  at::Tensor forward(const at::Tensor& x);  // [N, in, H, W] -> [N, channels, H, W]

  AsppOptions options;
  std::vector<ConvBnAct> branches;  // convs.0 (1x1), convs.1..R (dilated 3x3)
  AsppPooling pooling{nullptr};     // convs.R+1 (null without image pooling)
  ConvBnAct project{nullptr};
};
TORCH_MODULE(Aspp);

struct DeepLabDecoderOptions {
  DeepLabDecoderOptions(int64_t low_level_in, int64_t aspp_channels)
      : low_level_in_(low_level_in), aspp_channels_(aspp_channels) {}
  TORCH_ARG(int64_t, low_level_in);
  TORCH_ARG(int64_t, aspp_channels);
  TORCH_ARG(int64_t, low_level_channels) = 48;
  TORCH_ARG(int64_t, channels) = 256;
};

// low-level -> 1x1 (48) ; ASPP output upsampled (bilinear, align corners) to its size ; concat ;
// two 3x3 conv + BN + ReLU. Children: project, fuse.0, fuse.1.
class DeepLabDecoderImpl : public torch::nn::Module {
 public:
  explicit DeepLabDecoderImpl(const DeepLabDecoderOptions& options);
  at::Tensor forward(const at::Tensor& aspp_out, const at::Tensor& low_level);

  DeepLabDecoderOptions options;
  ConvBnAct project{nullptr}, fuse0{nullptr}, fuse1{nullptr};
};
TORCH_MODULE(DeepLabDecoder);

}  // namespace detseg
