// Implements: EfficientNet-B0..B7 with torchvision's efficientnet_bN layout and names.
#include "detseg/models/backbones/efficientnet.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cmath>

#include "detseg/core/error.h"
#include "detseg/models/layers/drop_connect.h"

namespace detseg {

namespace {

// The B0 stage table: expand ratio, kernel, stride, in, out, layers.
struct StageSpec {
  int64_t expand, kernel, stride, in, out, layers;
};
constexpr StageSpec kB0Stages[7] = {{1, 3, 1, 32, 16, 1},  {6, 3, 2, 16, 24, 2},
                                    {6, 5, 2, 24, 40, 2},  {6, 3, 2, 40, 80, 3},
                                    {6, 5, 1, 80, 112, 3}, {6, 5, 2, 112, 192, 4},
                                    {6, 3, 1, 192, 320, 1}};

// Rounds channels to a multiple of 8 without losing more than 10% (TF's make_divisible).
int64_t make_divisible(double v, int64_t divisor = 8) {
  int64_t n = std::max<int64_t>(divisor, static_cast<int64_t>(v + divisor / 2.0) / divisor * divisor);
  if (n < 0.9 * v) n += divisor;
  return n;
}

}  // namespace

EfficientNetScaling efficientnet_scaling(int64_t variant) {
  static const EfficientNetScaling table[8] = {{1.0, 1.0, 224}, {1.0, 1.1, 240}, {1.1, 1.2, 260},
                                               {1.2, 1.4, 300}, {1.4, 1.8, 380}, {1.6, 2.2, 456},
                                               {1.8, 2.6, 528}, {2.0, 3.1, 600}};
  DETSEG_CONFIG_CHECK(variant >= 0 && variant <= 7, "EfficientNet: variant must be 0..7 (B0..B7), got ",
                      variant);
  return table[variant];
}

MBConvImpl::MBConvImpl(int64_t in, int64_t out, int64_t expand_ratio, int64_t kernel,
                       int64_t stride, double drop_connect_p_, double eps, double momentum)
    : residual(stride == 1 && in == out), drop_connect_p(drop_connect_p_) {
  const int64_t expanded = make_divisible(static_cast<double>(in * expand_ratio));
  auto cba = [&](int64_t i, int64_t o, int64_t k) {
    return ConvBnActOptions(i, o, k).eps(eps).momentum(momentum).activation(Activation::kSiLU);
  };
  torch::nn::ModuleList block;
  if (expanded != in) {
    expand = ConvBnAct(cba(in, expanded, 1));
    block->push_back(expand);
  }
  depthwise = ConvBnAct(cba(expanded, expanded, kernel).stride(stride).groups(expanded));
  block->push_back(depthwise);
  se = SqueezeExcite(expanded, std::max<int64_t>(1, in / 4), Activation::kSiLU);
  block->push_back(se);
  project = ConvBnAct(cba(expanded, out, 1).activation(Activation::kNone));
  block->push_back(project);
  register_module("block", block);
}

at::Tensor MBConvImpl::forward(const at::Tensor& x) {
  at::Tensor y = expand ? expand->forward(x) : x;
  y = project->forward(se->forward(depthwise->forward(y)));
  if (!residual) return y;
  return drop_connect(y, drop_connect_p, is_training()).add_(x);
}

EfficientNetImpl::EfficientNetImpl(const EfficientNetOptions& options_) : options(options_) {
  const EfficientNetScaling scaling = efficientnet_scaling(options.variant());
  const double eps = options.bn_eps() >= 0 ? options.bn_eps() : (options.variant() >= 5 ? 1e-3 : 1e-5);
  const double momentum = options.bn_momentum();
  for (int64_t s : options.returned_stages()) {
    DETSEG_CONFIG_CHECK(s >= 1 && s <= 7, "EfficientNet: returned_stages entries must be 1..7, got ", s);
  }
  auto width = [&](int64_t c) { return make_divisible(c * scaling.width_mult); };
  auto depth = [&](int64_t n) { return static_cast<int64_t>(std::ceil(n * scaling.depth_mult)); };

  torch::nn::ModuleList features;
  stem = ConvBnAct(ConvBnActOptions(3, width(kB0Stages[0].in), 3)
                       .stride(2)
                       .eps(eps)
                       .momentum(momentum)
                       .activation(Activation::kSiLU));
  features->push_back(stem);
  int64_t total_blocks = 0;
  for (const auto& st : kB0Stages) total_blocks += depth(st.layers);
  int64_t block_id = 0, stride = 2;
  for (const auto& st : kB0Stages) {
    torch::nn::ModuleList stage_list;
    std::vector<MBConv> blocks;
    const int64_t out = width(st.out);
    for (int64_t b = 0; b < depth(st.layers); ++b) {
      const int64_t in = b == 0 ? width(st.in) : out;
      const double p = options.drop_connect_rate() * block_id / total_blocks;
      blocks.emplace_back(in, out, st.expand, st.kernel, b == 0 ? st.stride : 1, p, eps, momentum);
      stage_list->push_back(blocks.back());
      ++block_id;
    }
    stride *= st.stride;
    features->push_back(stage_list);
    stages.push_back(std::move(blocks));
    stage_channels.push_back(out);
    stage_strides.push_back(stride);
  }
  if (options.head_conv()) {
    const int64_t last = width(kB0Stages[6].out);
    head = ConvBnAct(ConvBnActOptions(last, 4 * last, 1).eps(eps).momentum(momentum).activation(Activation::kSiLU));
    features->push_back(head);
  }
  register_module("features", features);
  // torchvision's init: kaiming normal (fan_out) convs, zero biases; BN weight 1, bias 0.
  for (auto& p : named_parameters(true)) {
    const std::string& key = p.key();
    if (p.value().dim() == 4) {
      torch::nn::init::kaiming_normal_(p.value(), 0.0, torch::kFanOut);
    } else if (key.size() >= 4 && key.compare(key.size() - 4, 4, "bias") == 0) {
      torch::nn::init::zeros_(p.value());
    }
  }
}

std::vector<at::Tensor> EfficientNetImpl::forward(const at::Tensor& images) {
  TORCH_CHECK(images.dim() == 4 && images.size(1) == 3,
              "EfficientNet: images must be [N, 3, H, W], got ", images.sizes());
  const auto& wanted = options.returned_stages();
  const int64_t last = *std::max_element(wanted.begin(), wanted.end());
  at::Tensor x = stem->forward(images);
  std::vector<at::Tensor> outs;
  for (int64_t s = 0; s < last; ++s) {
    for (auto& block : stages[s]) x = block->forward(x);
    if (std::find(wanted.begin(), wanted.end(), s + 1) != wanted.end()) outs.push_back(x);
  }
  return outs;
}

std::vector<FeatureSpec> EfficientNetImpl::feature_specs() const {
  std::vector<FeatureSpec> specs;
  auto wanted = options.returned_stages();
  std::sort(wanted.begin(), wanted.end());
  for (int64_t s : wanted) {
    specs.push_back({"features." + std::to_string(s), stage_channels[s - 1], stage_strides[s - 1]});
  }
  return specs;
}

}  // namespace detseg
