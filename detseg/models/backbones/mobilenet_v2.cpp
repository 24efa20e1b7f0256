// Implements: MobileNetV2 with torchvision's names and DeepLab's output-stride option.
#include "detseg/models/backbones/mobilenet_v2.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/container/sequential.h>

#include <algorithm>

#include "detseg/core/error.h"
#include "detseg/models/registry.h"

namespace detseg {

InvertedResidualImpl::InvertedResidualImpl(int64_t in, int64_t out, int64_t stride, int64_t expand_ratio,
                                           int64_t dilation, bool frozen_bn)
    : residual(stride == 1 && in == out) {
  const int64_t hidden = in * expand_ratio;
  torch::nn::Sequential conv;
  if (expand_ratio != 1) {
    expand = ConvBnAct(ConvBnActOptions(in, hidden, 1).frozen_norm(frozen_bn).activation(Activation::kReLU6));
    conv->push_back(expand);
  }
  depthwise = ConvBnAct(ConvBnActOptions(hidden, hidden, 3)
                            .stride(stride)
                            .groups(hidden)
                            .dilation(dilation)
                            .frozen_norm(frozen_bn)
                            .activation(Activation::kReLU6));
  conv->push_back(depthwise);
  project = make_conv2d(hidden, out, 1, 1, false);
  project_bn = Norm2d(Norm2dOptions(out).frozen(frozen_bn));
  conv->push_back(project);
  conv->push_back(project_bn);
  register_module("conv", conv);
}

at::Tensor InvertedResidualImpl::forward(const at::Tensor& x) {
  at::Tensor y = expand ? expand->forward(x) : x;
  y = conv2d_norm(project, project_bn, depthwise->forward(y));
  return residual ? y.add_(x) : y;
}

MobileNetV2Impl::MobileNetV2Impl(const MobileNetV2Options& options_) : options(options_) {
  const int64_t os = options.output_stride();
  DETSEG_CONFIG_CHECK(os == 8 || os == 16 || os == 32, "MobileNetV2: output_stride must be 8, 16 or 32, got ", os);
  for (int64_t b : options.returned_blocks())
    DETSEG_CONFIG_CHECK(b >= 1 && b <= 17, "MobileNetV2: returned_blocks entries must be in [1, 17], got ", b);
  const bool frozen = options.frozen_bn();
  torch::nn::Sequential features;
  stem = ConvBnAct(ConvBnActOptions(3, 32, 3).stride(2).frozen_norm(frozen).activation(Activation::kReLU6));
  features->push_back(stem);
  // (expand ratio t, channels c, repeats n, first stride s): the paper's table 2.
  const int64_t settings[7][4] = {{1, 16, 1, 1},  {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                  {6, 96, 3, 1},  {6, 160, 3, 2}, {6, 320, 1, 1}};
  int64_t in = 32, current_stride = 2, rate = 1;
  for (const auto& st : settings) {
    for (int64_t i = 0; i < st[2]; ++i) {
      const int64_t stride = i == 0 ? st[3] : 1;
      int64_t layer_stride = stride, layer_rate = 1;
      if (current_stride == os) {  // TF-slim: keep the resolution, dilate from the next block on
        layer_stride = 1;
        layer_rate = rate;
        rate *= stride;
      } else {
        current_stride *= stride;
      }
      blocks.emplace_back(in, st[1], layer_stride, st[0], layer_rate, frozen);
      features->push_back(blocks.back());
      in = st[1];
      block_channels.push_back(in);
      block_strides.push_back(current_stride);
    }
  }
  register_module("features", features);
  // torchvision's init: kaiming normal (fan_out) for convs.
  for (auto& p : named_parameters(/*recurse=*/true)) {
    if (p.value().dim() == 4) torch::nn::init::kaiming_normal_(p.value(), 0.0, torch::kFanOut);
  }
}

std::vector<at::Tensor> MobileNetV2Impl::forward(const at::Tensor& images) {
  TORCH_CHECK(images.dim() == 4 && images.size(1) == 3, "MobileNetV2: images must be [N, 3, H, W], got ",
              images.sizes());
  const auto& wanted = options.returned_blocks();
  const int64_t last = *std::max_element(wanted.begin(), wanted.end());
  at::Tensor x = stem->forward(images);
  std::vector<at::Tensor> outs;
  for (int64_t b = 1; b <= last; ++b) {
    x = blocks[static_cast<size_t>(b - 1)]->forward(x);
    if (std::find(wanted.begin(), wanted.end(), b) != wanted.end()) outs.push_back(x);
  }
  return outs;
}

std::vector<FeatureSpec> MobileNetV2Impl::feature_specs() const {
  std::vector<FeatureSpec> specs;
  auto wanted = options.returned_blocks();
  std::sort(wanted.begin(), wanted.end());
  for (int64_t b : wanted)
    specs.push_back({"features." + std::to_string(b), block_channels[static_cast<size_t>(b - 1)],
                     block_strides[static_cast<size_t>(b - 1)]});
  return specs;
}

std::shared_ptr<BackboneImpl> make_mobilenet_v2(const std::string&, const BackboneOptions& o) {
  MobileNetV2Options m;
  m.output_stride(o.output_stride).frozen_bn(o.frozen_bn);
  m.returned_blocks(o.low_level ? std::vector<int64_t>{3, 17} : std::vector<int64_t>{17});
  return std::make_shared<MobileNetV2Impl>(m);
}

}  // namespace detseg
