// Implements: torchvision's FeaturePyramidNetwork with LastLevelP6P7 (RetinaNet's P3-P7 neck) or
// LastLevelMaxPool (Faster/Mask R-CNN's P2-P6 neck); keys match torchvision: inner_blocks.i.0.*,
// layer_blocks.i.0.*, extra_blocks.p6/p7.*.
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "detseg/models/layers/conv_bn_act.h"
#include "detseg/models/necks/neck.h"

namespace detseg {

struct FpnOptions {
  FpnOptions(std::vector<int64_t> in_channels, int64_t out_channels)
      : in_channels_(std::move(in_channels)), out_channels_(out_channels) {}
  TORCH_ARG(std::vector<int64_t>, in_channels);  // finest first (e.g. C3, C4, C5)
  TORCH_ARG(int64_t, out_channels);
  // P6/P7 on top (LastLevelP6P7). P6 is computed from P5 when true (torchvision
  // retinanet_resnet50_fpn, in_channels == out_channels), from C5 otherwise (the _v2 model).
  TORCH_ARG(bool, extra_p6p7) = true;
  TORCH_ARG(bool, p6_from_p5) = true;
  // One more level by max-pooling the coarsest output (kernel 1, stride 2): torchvision's
  // LastLevelMaxPool, the "pool" level of fasterrcnn_resnet50_fpn. Excludes extra_p6p7.
  TORCH_ARG(bool, extra_max_pool) = false;
};

// Also model.neck "fpn" (make_fpn_neck): C3-C5 -> P3-P7 with P6/P7 on top.
class FpnImpl : public NeckImpl {
 public:
  explicit FpnImpl(const FpnOptions& options);
  // features: C_l maps finest first -> P_l maps finest first (+ P6, P7 or the pooled level).
  std::vector<at::Tensor> forward(const std::vector<at::Tensor>& features) override;

  FpnOptions options;
  std::vector<ConvBnAct> inner, layer;  // registered as inner_blocks.i / layer_blocks.i
  torch::nn::Conv2d p6{nullptr}, p7{nullptr};
};
TORCH_MODULE(Fpn);

}  // namespace detseg
