// Implements: torchvision's FeaturePyramidNetwork with LastLevelP6P7 or LastLevelMaxPool.
#include "detseg/models/necks/fpn.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/container/modulelist.h>

#include "detseg/core/error.h"

namespace detseg {

namespace {
ConvBnActOptions plain_conv(int64_t in, int64_t out, int64_t k) {
  return ConvBnActOptions(in, out, k).norm(false).activation(Activation::kNone);
}
// torchvision: kaiming_uniform_(a=1), bias 0 for every FPN conv.
void init_conv(torch::nn::Conv2d& conv) {
  torch::nn::init::kaiming_uniform_(conv->weight, 1.0);
  torch::nn::init::zeros_(conv->bias);
}
}  // namespace

FpnImpl::FpnImpl(const FpnOptions& options_) : options(options_) {
  DETSEG_CONFIG_CHECK(!options.in_channels().empty(), "FPN: in_channels is empty");
  torch::nn::ModuleList inner_blocks, layer_blocks;
  const int64_t out = options.out_channels();
  for (int64_t c : options.in_channels()) {
    inner.emplace_back(plain_conv(c, out, 1));
    layer.emplace_back(plain_conv(out, out, 3));
    inner_blocks->push_back(inner.back());
    layer_blocks->push_back(layer.back());
    init_conv(inner.back()->conv);
    init_conv(layer.back()->conv);
  }
  register_module("inner_blocks", inner_blocks);
  register_module("layer_blocks", layer_blocks);
  DETSEG_CONFIG_CHECK(!(options.extra_p6p7() && options.extra_max_pool()),
                      "FPN: extra_p6p7 and extra_max_pool exclude each other");
  if (options.extra_p6p7()) {
    auto extra = std::make_shared<torch::nn::Module>("LastLevelP6P7");
    const int64_t p6_in = options.p6_from_p5() ? out : options.in_channels().back();
    p6 = extra->register_module("p6", make_conv2d(p6_in, out, 3, 2));
    p7 = extra->register_module("p7", make_conv2d(out, out, 3, 2));
    init_conv(p6);
    init_conv(p7);
    register_module("extra_blocks", extra);
  }
}

std::vector<at::Tensor> FpnImpl::forward(const std::vector<at::Tensor>& features) {
  const size_t n = inner.size();
  TORCH_CHECK(features.size() == n, "FPN: expected ", n, " feature maps, got ", features.size());
  std::vector<at::Tensor> results(n);
  at::Tensor last_inner = inner[n - 1]->forward(features[n - 1]);
  results[n - 1] = layer[n - 1]->forward(last_inner);
  for (size_t k = n - 1; k-- > 0;) {
    at::Tensor lateral = inner[k]->forward(features[k]);
    // Nearest upsampling to the lateral's exact size (odd sizes included), as torchvision.
    at::Tensor top_down = at::upsample_nearest2d(last_inner, {lateral.size(2), lateral.size(3)});
    last_inner = lateral.add_(top_down);
    results[k] = layer[k]->forward(last_inner);
  }
  if (options.extra_p6p7()) {
    const at::Tensor& src = options.p6_from_p5() ? results.back() : features.back();
    at::Tensor p6_out = p6->forward(src);
    at::Tensor p7_out = p7->forward(at::relu(p6_out));
    results.push_back(p6_out);
    results.push_back(p7_out);
  }
  if (options.extra_max_pool()) results.push_back(at::max_pool2d(results.back(), {1, 1}, {2, 2}, {0, 0}, {1, 1}));
  return results;
}

std::shared_ptr<NeckImpl> make_fpn_neck(const NeckOptions& o) {
  return std::make_shared<FpnImpl>(FpnOptions(o.in_channels, o.width).extra_p6p7(true).p6_from_p5(o.p6_from_p5));
}

}  // namespace detseg
