// Implements: ResNet-18/34/50/101 (torchvision layout and parameter names) as a detection backbone.
#include "detseg/models/backbones/resnet.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/container/modulelist.h>

#include "detseg/core/error.h"
#include "detseg/models/registry.h"

namespace detseg {

namespace {

Norm2d make_norm(int64_t c, bool frozen) {
  return Norm2d(Norm2dOptions(c).frozen(frozen));
}

struct DepthSpec {
  bool bottleneck;
  std::vector<int64_t> blocks;
};

DepthSpec depth_spec(int64_t depth) {
  switch (depth) {
    case 18: return {false, {2, 2, 2, 2}};
    case 34: return {false, {3, 4, 6, 3}};
    case 50: return {true, {3, 4, 6, 3}};
    case 101: return {true, {3, 4, 23, 3}};
    default: break;
  }
  throw ConfigError(str("ResNet: depth must be 18, 34, 50 or 101, got ", depth));
}

}  // namespace

ResNetBlockImpl::ResNetBlockImpl(int64_t in, int64_t planes, int64_t stride, bool bottleneck_,
                                 bool frozen_bn, int64_t dilation)
    : bottleneck(bottleneck_) {
  const int64_t expansion = bottleneck ? 4 : 1;
  const int64_t out = planes * expansion;
  if (bottleneck) {
    // torchvision v1.5: the stride sits on the 3x3 conv.
    conv1 = register_module("conv1", make_conv2d(in, planes, 1, 1, false));
    bn1 = register_module("bn1", make_norm(planes, frozen_bn));
    conv2 = register_module("conv2", make_conv2d(planes, planes, 3, stride, false, 1, dilation));
    bn2 = register_module("bn2", make_norm(planes, frozen_bn));
    conv3 = register_module("conv3", make_conv2d(planes, out, 1, 1, false));
    bn3 = register_module("bn3", make_norm(out, frozen_bn));
  } else {
    // torchvision's BasicBlock refuses dilation; here both 3x3 convs take it (mmsegmentation's rule).
    conv1 = register_module("conv1", make_conv2d(in, planes, 3, stride, false, 1, dilation));
    bn1 = register_module("bn1", make_norm(planes, frozen_bn));
    conv2 = register_module("conv2", make_conv2d(planes, planes, 3, 1, false, 1, dilation));
    bn2 = register_module("bn2", make_norm(planes, frozen_bn));
  }
  if (stride != 1 || in != out) {
    down_conv = make_conv2d(in, out, 1, stride, false);
    down_norm = make_norm(out, frozen_bn);
    downsample = register_module("downsample", torch::nn::Sequential(down_conv, down_norm));
  }
}

at::Tensor ResNetBlockImpl::forward(const at::Tensor& x) {
  at::Tensor y = conv2d_norm(conv1, bn1, x).relu_();
  if (bottleneck) {
    y = conv2d_norm(conv2, bn2, y).relu_();
    y = conv2d_norm(conv3, bn3, y);
  } else {
    y = conv2d_norm(conv2, bn2, y);
  }
  const at::Tensor identity = down_conv ? conv2d_norm(down_conv, down_norm, x) : x;
  return y.add_(identity).relu_();
}

ResNetImpl::ResNetImpl(const ResNetOptions& options_) : options(options_) {
  const DepthSpec spec = depth_spec(options.depth());
  DETSEG_CONFIG_CHECK(options.frozen_stages() >= 0 && options.frozen_stages() <= 5,
                      "ResNet: frozen_stages must be in [0, 5], got ", options.frozen_stages());
  DETSEG_CONFIG_CHECK(!options.returned_layers().empty(), "ResNet: returned_layers is empty");
  DETSEG_CONFIG_CHECK(options.replace_stride_with_dilation().size() == 3,
                      "ResNet: replace_stride_with_dilation needs 3 entries (layer2..layer4)");
  for (int64_t l : options.returned_layers()) {
    DETSEG_CONFIG_CHECK(l >= 1 && l <= 4, "ResNet: returned_layers entries must be in [1, 4], got ", l);
  }
  const bool frozen = options.frozen_bn();
  conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 64, 7)
                                                         .stride(2)
                                                         .padding(3)
                                                         .bias(false)));
  bn1 = register_module("bn1", make_norm(64, frozen));
  int64_t in = 64;
  const int64_t expansion = spec.bottleneck ? 4 : 1;
  int64_t dilation = 1, output_stride = 4;
  for (int64_t s = 0; s < 4; ++s) {
    const int64_t planes = 64 << s;
    int64_t stage_stride = s > 0 ? 2 : 1;
    // torchvision's _make_layer: a dilated stage's first block keeps the previous dilation.
    const int64_t previous_dilation = dilation;
    if (s > 0 && options.replace_stride_with_dilation()[static_cast<size_t>(s - 1)]) {
      dilation *= stage_stride;
      stage_stride = 1;
    }
    output_stride *= stage_stride;
    torch::nn::ModuleList layer;
    std::vector<ResNetBlock> blocks;
    for (int64_t b = 0; b < spec.blocks[s]; ++b) {
      blocks.emplace_back(in, planes, b == 0 ? stage_stride : 1, spec.bottleneck, frozen,
                          b == 0 ? previous_dilation : dilation);
      layer->push_back(blocks.back());
      in = planes * expansion;
    }
    register_module("layer" + std::to_string(s + 1), layer);
    stages.push_back(std::move(blocks));
    stage_channels.push_back(in);
    stage_strides.push_back(output_stride);
  }
  // torchvision's init: kaiming normal (fan_out, relu) for convs; BN weight 1, bias 0 (already).
  for (auto& p : named_parameters(/*recurse=*/true)) {
    if (p.value().dim() == 4) torch::nn::init::kaiming_normal_(p.value(), 0.0, torch::kFanOut, torch::kReLU);
  }
  apply_freezing();
}

void ResNetImpl::apply_freezing() {
  const int64_t n = options.frozen_stages();
  auto freeze = [](torch::nn::Module& m) {
    for (auto& p : m.parameters()) p.set_requires_grad(false);
  };
  if (n >= 1) {
    freeze(*conv1);
    freeze(*bn1);
  }
  for (int64_t s = 0; s + 1 < n && s < 4; ++s) {
    for (auto& block : stages[s]) freeze(*block);
  }
}

std::vector<at::Tensor> ResNetImpl::forward(const at::Tensor& images) {
  TORCH_CHECK(images.dim() == 4 && images.size(1) == 3, "ResNet: images must be [N, 3, H, W], got ",
              images.sizes());
  // The whole body is one run of convs (ops/fast_paths.h: at inference, oneDNN's blocked layout,
  // ~25% less time on this CPU than reordering around every conv); the features come out plain.
  at::Tensor x = conv2d_norm(conv1, bn1, to_fast_layout(images, is_training())).relu_();
  x = at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1}, {1, 1});  // 2-d dilation: ONNX needs one per axis
  std::vector<at::Tensor> outs;
  const auto& wanted = options.returned_layers();
  const int64_t last = *std::max_element(wanted.begin(), wanted.end());
  for (int64_t s = 0; s < last; ++s) {
    for (auto& block : stages[s]) x = block->forward(x);
    if (std::find(wanted.begin(), wanted.end(), s + 1) != wanted.end()) outs.push_back(to_plain_layout(x));
  }
  return outs;
}

std::vector<FeatureSpec> ResNetImpl::feature_specs() const {
  std::vector<FeatureSpec> specs;
  auto wanted = options.returned_layers();
  std::sort(wanted.begin(), wanted.end());
  for (int64_t l : wanted) {
    specs.push_back({"layer" + std::to_string(l), stage_channels[l - 1], stage_strides[l - 1]});
  }
  return specs;
}

// resnet18 .. resnet101 in parts.def: the atrous ResNet DeepLab takes (layer3/layer4 dilate past
// the output stride).
std::shared_ptr<BackboneImpl> make_resnet(const std::string& name, const BackboneOptions& o) {
  ResNetOptions r(std::stoll(name.substr(6)));
  r.frozen_bn(o.frozen_bn).frozen_stages(0).replace_stride_with_dilation({false, o.output_stride <= 8, o.output_stride <= 16});
  r.returned_layers(o.low_level ? std::vector<int64_t>{1, 4} : std::vector<int64_t>{4});
  return std::make_shared<ResNetImpl>(r);
}

}  // namespace detseg
