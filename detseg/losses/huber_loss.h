// Implements: box regression losses: the reference's masked Huber loss and smooth L1.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

namespace detseg {

struct HuberLossOptions {
  TORCH_ARG(double, delta) = 0.1;  // about the mean regression target (reference comment)
};

// Elementwise Huber, as tf.losses.huber_loss: 0.5 d^2 where |d| <= delta, else delta (|d| - delta/2).
at::Tensor huber_loss_elementwise(const at::Tensor& outputs, const at::Tensor& targets,
                                  double delta);

// The reference's _box_loss: sum of Huber(targets - outputs) over elements whose target is non-zero,
// divided by num_positives * 4.
//   outputs, targets: same shape, last dim 4 ([..., 4] box deltas); num_positives: scalar tensor.
at::Tensor huber_box_loss(const at::Tensor& outputs, const at::Tensor& targets,
                          const at::Tensor& num_positives, const HuberLossOptions& options = {});

// Smooth L1 (torch/detectron2 convention: 0.5 d^2 / beta where |d| < beta, else |d| - beta/2),
// summed over all elements; beta = 0 is plain L1.
at::Tensor smooth_l1_loss_sum(const at::Tensor& outputs, const at::Tensor& targets, double beta);

}  // namespace detseg
