// Implements: EfficientDet's class and box nets: separable convs shared across levels with a
// batch norm per level, swish, and a separable-conv predictor.
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "detseg/models/heads/dense_head.h"
#include "detseg/models/layers/frozen_batch_norm.h"
#include "detseg/models/layers/separable_conv.h"

namespace detseg {

struct EfficientDetHeadOptions {
  EfficientDetHeadOptions(int64_t width, int64_t depth, int64_t num_anchors, int64_t num_classes)
      : width_(width), depth_(depth), num_anchors_(num_anchors), num_classes_(num_classes) {}
  TORCH_ARG(int64_t, width);        // W_bifpn
  TORCH_ARG(int64_t, depth);        // D_box = D_class
  TORCH_ARG(int64_t, num_anchors);
  TORCH_ARG(int64_t, num_classes);
  TORCH_ARG(int64_t, num_levels) = 5;
  TORCH_ARG(double, prior_probability) = 0.01;
  TORCH_ARG(double, eps) = 1e-3;
  TORCH_ARG(double, momentum) = 0.01;
};

// One net. Children: convs.i (separable, no BN), bns.i.l (BN of layer i at level l), predict.
class EfficientDetSubnetImpl : public torch::nn::Module {
 public:
  EfficientDetSubnetImpl(const EfficientDetHeadOptions& options, int64_t outputs_per_anchor,
                         double bias_init);
  // features: per level [N, W, H_l, W_l] -> [N, sum(H_l W_l A), outputs_per_anchor]
  at::Tensor forward(const std::vector<at::Tensor>& features);

  int64_t outputs_per_anchor;
  std::vector<SeparableConv> convs;
  std::vector<std::vector<Norm2d>> bns;  // [depth][level]
  SeparableConv predict{nullptr};
};
TORCH_MODULE(EfficientDetSubnet);

// The class net has K outputs per anchor with the prior-probability bias; the box net 4.
EfficientDetSubnet make_efficientdet_class_net(const EfficientDetHeadOptions& options);
EfficientDetSubnet make_efficientdet_box_net(const EfficientDetHeadOptions& options);

// Both nets: model.head "efficientdet" (make_efficientdet_head). Children class_net and box_net
// (EfficientDet's network registers them at its top level, the reference's layout).
class EfficientDetHeadImpl : public DenseHeadImpl {
 public:
  explicit EfficientDetHeadImpl(const EfficientDetHeadOptions& options);
  DenseHeadOutputs forward(const std::vector<at::Tensor>& pyramid) override;

  EfficientDetSubnet class_net{nullptr}, box_net{nullptr};
};

}  // namespace detseg
