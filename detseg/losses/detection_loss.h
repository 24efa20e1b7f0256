// Implements: the one-stage detection loss: focal class loss + box_loss_weight * box loss (the
// reference's Huber, or another of losses/box_losses.h that model.box_loss names).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

#include <vector>

#include "detseg/losses/box_losses.h"

namespace detseg {

struct DetectionLossOptions {
  TORCH_ARG(double, alpha) = 0.25;
  TORCH_ARG(double, gamma) = 2.0;
  TORCH_ARG(double, delta) = 0.1;  // huber's
  TORCH_ARG(double, box_loss_weight) = 50.0;
  TORCH_ARG(BoxLossFunction, box_loss) = huber_box_loss_of;
};

// The parts are reported separately so the loop can log them; total = cls + w * box.
struct DetectionLosses {
  at::Tensor total;          // scalar
  at::Tensor cls;            // scalar
  at::Tensor box;            // scalar
  at::Tensor num_positives;  // scalar: positives in the batch + 1 (the normaliser used)
};

// Dense (flattened over levels) form, anchors in the network's output order.
//   cls_logits: [N, A, K]; box_regression: [N, A, 4]
//   cls_targets: [N, A] integer (k >= 0 class, -1 background, -2 ignore)
//   box_targets: [N, A, 4] encoded deltas, zero for non-positive anchors
//   anchors: [A, 4] xyxy, needed only by box losses on decoded boxes (giou)
// As the reference: the normaliser is the number of positive anchors in the whole batch + 1.
DetectionLosses detection_loss(const at::Tensor& cls_logits, const at::Tensor& box_regression,
                               const at::Tensor& cls_targets, const at::Tensor& box_targets,
                               const DetectionLossOptions& options = {}, const at::Tensor& anchors = {});

// Per-level form: each vector holds one tensor per pyramid level with the shapes above
// ([N, A_l, K] etc.); the result equals the flattened form on the concatenation.
DetectionLosses detection_loss(const std::vector<at::Tensor>& cls_logits,
                               const std::vector<at::Tensor>& box_regression,
                               const std::vector<at::Tensor>& cls_targets,
                               const std::vector<at::Tensor>& box_targets,
                               const DetectionLossOptions& options = {}, const at::Tensor& anchors = {});

}  // namespace detseg
