// Implements: Xception-65 as DeepLab builds it (its core/xception.py): an entry flow (two 3x3 convs,
// three strided Xception modules of 128/256/728 channels with 1x1 conv shortcuts), a middle flow of
// 16 modules of 728 channels with identity shortcuts, and an exit flow (728/1024/1024 strided with
// a conv shortcut, then 1536/1536/2048 with ReLU inside the separable convs and no shortcut). Each
// module is three separable convs (depthwise 3x3 + BN, pointwise 1x1 + BN) preceded by ReLU; the
// last one carries the stride. Output stride 8/16/32 with TF-slim's atrous rule, and the decoder's
// stride-4 features taken, as DeepLab does, after the second separable conv of entry block 2.
#pragma once

#include <torch/arg.h>
#include <torch/nn/pimpl.h>

#include <array>
#include <vector>

#include "detseg/models/backbones/backbone.h"
#include "detseg/models/layers/conv_bn_act.h"

namespace detseg {

struct XceptionOptions {
  TORCH_ARG(int64_t, output_stride) = 32;  // 8, 16 or 32
  TORCH_ARG(bool, frozen_bn) = false;
  TORCH_ARG(bool, low_level) = true;       // also return the stride-4 (256-channel) features
  TORCH_ARG(int64_t, middle_blocks) = 16;  // Xception-65: 16
};

// depthwise 3x3 (stride, dilation) + BN [+ ReLU] -> pointwise 1x1 + BN [+ ReLU].
// Children: depthwise (0 conv, 1 norm), pointwise (0 conv, 1 norm).
class XceptionSeparableConvImpl : public torch::nn::Module {
 public:
  XceptionSeparableConvImpl(int64_t in, int64_t out, int64_t stride, int64_t dilation, bool relu_inside,
                            bool frozen_bn);
  at::Tensor forward(const at::Tensor& x);
  ConvBnAct depthwise{nullptr}, pointwise{nullptr};
};
TORCH_MODULE(XceptionSeparableConv);

enum class XceptionSkip { kConv, kSum, kNone };

// Children: sep.0, sep.1, sep.2, [shortcut (0 conv 1x1, 1 norm)].
class XceptionModuleImpl : public torch::nn::Module {
 public:
  XceptionModuleImpl(int64_t in, std::array<int64_t, 3> depths, XceptionSkip skip, int64_t stride, int64_t dilation,
                     bool relu_inside, bool frozen_bn);
  // `after_second` (when not null) receives the output of the second separable conv.
  at::Tensor forward(const at::Tensor& x, at::Tensor* after_second = nullptr);

  XceptionSkip skip;
  bool relu_inside;
  std::vector<XceptionSeparableConv> convs;
  ConvBnAct shortcut{nullptr};
};
TORCH_MODULE(XceptionModule);

class XceptionImpl : public BackboneImpl {
 public:
  explicit XceptionImpl(const XceptionOptions& options);
  // -> {stride-4 features (256 ch, when low_level), last features (2048 ch)}
  std::vector<at::Tensor> forward(const at::Tensor& images) override;
  std::vector<FeatureSpec> feature_specs() const override;

  XceptionOptions options;
  ConvBnAct conv1{nullptr}, conv2{nullptr};
  std::vector<XceptionModule> blocks;  // entry 3, middle N, exit 2
  int64_t final_stride = 32;
};
TORCH_MODULE(Xception);

}  // namespace detseg
