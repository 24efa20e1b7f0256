// Implements: RetinaNet's class and box subnets (torchvision 0.14 RetinaNetHead: 4 conv 3x3 + ReLU
// layers shared across levels, no norm), keys head.classification_head.conv.i.0.* / cls_logits.*
// and head.regression_head.conv.i.0.* / bbox_reg.*. With group_norm_groups > 0 each conv is followed
// by GroupNorm (conv.i.1.*), as in torchvision's retinanet_resnet50_fpn_v2: statistics per image and
// level, which lets a head trained from scratch learn much faster than the plain one.
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "detseg/models/heads/dense_head.h"
#include "detseg/models/layers/conv_bn_act.h"

namespace detseg {

struct RetinaNetHeadOptions {
  RetinaNetHeadOptions(int64_t in_channels, int64_t num_anchors, int64_t num_classes)
      : in_channels_(in_channels), num_anchors_(num_anchors), num_classes_(num_classes) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, num_anchors);
  TORCH_ARG(int64_t, num_classes);
  TORCH_ARG(int64_t, num_convs) = 4;
  TORCH_ARG(double, prior_probability) = 0.01;  // class bias = -log((1 - p) / p)
  TORCH_ARG(int64_t, group_norm_groups) = 0;    // 0: no norm (torchvision v1); 32: v2's GroupNorm
};

// One subnet: conv.i (conv 3x3 + ReLU) then a predictor conv producing A * outputs_per_anchor.
class RetinaNetSubnetImpl : public torch::nn::Module {
 public:
  RetinaNetSubnetImpl(const RetinaNetHeadOptions& options, int64_t outputs_per_anchor,
                      const std::string& predictor_name, double bias_init);
  // features: per level [N, C, H_l, W_l] -> [N, sum(H_l W_l A), outputs_per_anchor], anchors ordered
  // (level, y, x, anchor) like torchvision.
  at::Tensor forward(const std::vector<at::Tensor>& features);

  int64_t outputs_per_anchor;
  std::vector<ConvBnAct> convs;
  std::vector<torch::nn::GroupNorm> group_norms;  // one per conv, or none
  torch::nn::Conv2d predictor{nullptr};
  PackedConvWeights packed_predictor;  // for the fast layout (conv2d_any_layout)
};
TORCH_MODULE(RetinaNetSubnet);

// Reshapes a predictor output [N, A * D, H, W] to [N, H * W * A, D].
at::Tensor flatten_dense_prediction(const at::Tensor& x, int64_t outputs_per_anchor);

// Also model.head "retinanet" (make_retinanet_head).
class RetinaNetHeadImpl : public DenseHeadImpl {
 public:
  explicit RetinaNetHeadImpl(const RetinaNetHeadOptions& options);
  DenseHeadOutputs forward(const std::vector<at::Tensor>& pyramid) override;

  RetinaNetHeadOptions options;
  RetinaNetSubnet classification_head{nullptr}, regression_head{nullptr};
};
TORCH_MODULE(RetinaNetHead);

}  // namespace detseg
