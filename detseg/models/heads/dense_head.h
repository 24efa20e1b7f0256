// Implements: the head interface of the dense detectors (model.head): pyramid maps P3..P7 -> a
// class logit per anchor and class and a box code per anchor. The heads are config/parts.def's
// DETSEG_DENSE_HEAD lines; a new one is a file that derives from DenseHeadImpl, defines its maker,
// and adds its line there.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "detseg/models/dense_outputs.h"

namespace detseg {

// What a dense detector asks of its head. Each head reads the fields it has a use for.
struct DenseHeadOptions {
  int64_t in_channels = 256;  // the neck's width
  int64_t num_anchors = 9;
  int64_t num_classes = 1;
  int64_t depth = 4;          // conv layers per subnet before its predictor
  int64_t num_levels = 5;     // efficientdet: a batch norm per level
  double prior_probability = 0.01;  // class bias = -log((1 - p) / p)
  int64_t group_norm_groups = 0;    // retinanet: GroupNorm after each conv (0: none)
  double bn_eps = 1e-3;             // heads with batch norm (efficientdet)
  double bn_momentum = 0.01;
};

// Anchors are ordered (level, y, x, anchor), as DenseOutputs says.
struct DenseHeadOutputs {
  at::Tensor cls_logits;      // [N, sum(H_l W_l A), K]
  at::Tensor box_regression;  // [N, sum(H_l W_l A), 4]
};

class DenseHeadImpl : public torch::nn::Module {
 public:
  virtual DenseHeadOutputs forward(const std::vector<at::Tensor>& pyramid) = 0;

  // forward's predictions with the pyramid's level geometry (P3 first): what a dense detector's
  // network returns.
  DenseOutputs predict(const std::vector<at::Tensor>& pyramid) {
    DenseHeadOutputs predicted = forward(pyramid);
    DenseOutputs out;
    out.cls_logits = std::move(predicted.cls_logits);
    out.box_regression = std::move(predicted.box_regression);
    set_level_geometry(out, pyramid, /*min_level=*/3);
    return out;
  }
};

}  // namespace detseg
