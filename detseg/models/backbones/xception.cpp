// Implements: DeepLab's Xception-65 (see the header).
#include "detseg/models/backbones/xception.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/container/modulelist.h>

#include "detseg/core/error.h"
#include "detseg/models/registry.h"

namespace detseg {

XceptionSeparableConvImpl::XceptionSeparableConvImpl(int64_t in, int64_t out, int64_t stride, int64_t dilation,
                                                     bool relu_inside, bool frozen_bn) {
  const Activation act = relu_inside ? Activation::kReLU : Activation::kNone;
  depthwise = register_module("depthwise", ConvBnAct(ConvBnActOptions(in, in, 3)
                                                         .stride(stride)
                                                         .dilation(dilation)
                                                         .groups(in)
                                                         .eps(1e-3)
                                                         .frozen_norm(frozen_bn)
                                                         .activation(act)));
  pointwise = register_module(
      "pointwise", ConvBnAct(ConvBnActOptions(in, out, 1).eps(1e-3).frozen_norm(frozen_bn).activation(act)));
}

at::Tensor XceptionSeparableConvImpl::forward(const at::Tensor& x) { return pointwise->forward(depthwise->forward(x)); }

XceptionModuleImpl::XceptionModuleImpl(int64_t in, std::array<int64_t, 3> depths, XceptionSkip skip_, int64_t stride,
                                       int64_t dilation, bool relu_inside_, bool frozen_bn)
    : skip(skip_), relu_inside(relu_inside_) {
  torch::nn::ModuleList sep;
  int64_t c = in;
  for (int i = 0; i < 3; ++i) {
    convs.push_back(XceptionSeparableConv(c, depths[i], i == 2 ? stride : 1, dilation, relu_inside, frozen_bn));
    sep->push_back(convs.back());
    c = depths[i];
  }
  register_module("sep", sep);
  if (skip == XceptionSkip::kConv)
    shortcut = register_module("shortcut", ConvBnAct(ConvBnActOptions(in, depths[2], 1)
                                                         .stride(stride)
                                                         .eps(1e-3)
                                                         .frozen_norm(frozen_bn)
                                                         .activation(Activation::kNone)));
  DETSEG_CHECK(skip != XceptionSkip::kSum || (in == depths[2] && stride == 1),
               "Xception: an identity shortcut needs equal channels and stride 1");
}

at::Tensor XceptionModuleImpl::forward(const at::Tensor& x, at::Tensor* after_second) {
  at::Tensor y = x;
  for (size_t i = 0; i < convs.size(); ++i) {
    // Pre-activation, unless the ReLUs sit inside the separable convs.
    if (!relu_inside) y = at::relu(y);
    y = convs[i]->forward(y);
    if (i == 1 && after_second) *after_second = y;
  }
  if (skip == XceptionSkip::kConv) return y.add_(shortcut->forward(x));
  if (skip == XceptionSkip::kSum) return y.add_(x);
  return y;
}

XceptionImpl::XceptionImpl(const XceptionOptions& options_) : options(options_) {
  const int64_t os = options.output_stride();
  DETSEG_CONFIG_CHECK(os == 8 || os == 16 || os == 32, "Xception: output_stride must be 8, 16 or 32, got ", os);
  const bool frozen = options.frozen_bn();
  conv1 = register_module("conv1", ConvBnAct(ConvBnActOptions(3, 32, 3).stride(2).eps(1e-3).frozen_norm(frozen)));
  conv2 = register_module("conv2", ConvBnAct(ConvBnActOptions(32, 64, 3).eps(1e-3).frozen_norm(frozen)));
  struct Spec {
    std::array<int64_t, 3> depths;
    XceptionSkip skip;
    int64_t stride;
    bool relu_inside;
  };
  std::vector<Spec> specs = {{{128, 128, 128}, XceptionSkip::kConv, 2, false},
                             {{256, 256, 256}, XceptionSkip::kConv, 2, false},
                             {{728, 728, 728}, XceptionSkip::kConv, 2, false}};
  for (int64_t i = 0; i < options.middle_blocks(); ++i) specs.push_back({{728, 728, 728}, XceptionSkip::kSum, 1, false});
  specs.push_back({{728, 1024, 1024}, XceptionSkip::kConv, 2, false});
  specs.push_back({{1536, 1536, 2048}, XceptionSkip::kNone, 1, true});
  torch::nn::ModuleList list;
  int64_t in = 64, current_stride = 2, rate = 1;
  for (const Spec& s : specs) {
    int64_t stride = s.stride, dilation = 1;
    if (current_stride == os) {  // TF-slim: keep the resolution, dilate from here on
      dilation = rate;
      rate *= s.stride;
      stride = 1;
    } else {
      current_stride *= s.stride;
    }
    blocks.push_back(XceptionModule(in, s.depths, s.skip, stride, dilation, s.relu_inside, frozen));
    list->push_back(blocks.back());
    in = s.depths[2];
  }
  register_module("blocks", list);
  final_stride = current_stride;
}

std::vector<at::Tensor> XceptionImpl::forward(const at::Tensor& images) {
  TORCH_CHECK(images.dim() == 4 && images.size(1) == 3, "Xception: images must be [N, 3, H, W], got ", images.sizes());
  at::Tensor x = conv2->forward(conv1->forward(images));
  at::Tensor low;
  for (size_t i = 0; i < blocks.size(); ++i) x = blocks[i]->forward(x, i == 1 && options.low_level() ? &low : nullptr);
  if (options.low_level()) return {low, x};
  return {x};
}

std::vector<FeatureSpec> XceptionImpl::feature_specs() const {
  std::vector<FeatureSpec> specs;
  if (options.low_level()) specs.push_back({"blocks.1.sep.1", 256, 4});
  specs.push_back({"blocks." + std::to_string(blocks.size() - 1), 2048, final_stride});
  return specs;
}

std::shared_ptr<BackboneImpl> make_xception65(const std::string&, const BackboneOptions& o) {
  XceptionOptions x;
  x.output_stride(o.output_stride).frozen_bn(o.frozen_bn).low_level(o.low_level);
  return std::make_shared<XceptionImpl>(x);
}

}  // namespace detseg
