// Implements: sigmoid focal loss as EfficientDet's det_model_fn.py computes it (stable modulator).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

namespace detseg {

struct FocalLossOptions {
  TORCH_ARG(double, alpha) = 0.25;  // weight of positives; negatives get 1 - alpha
  TORCH_ARG(double, gamma) = 2.0;   // focusing exponent
};

// Per-element focal loss, not reduced or normalised.
//   logits, targets: same shape, targets in {0, 1} (soft targets work but alpha picks by == 1).
// The modulator (1 - p_t)^gamma is computed as exp(-gamma * z * x - gamma * log(1 + exp(-x))), the
// reference's form whose gradient stays finite for gamma < 1; log(1 + exp(-x)) is evaluated as
// softplus(-x), equal where the reference's log1p(exp(-x)) is finite and finite where it is not.
at::Tensor focal_loss_elementwise(const at::Tensor& logits, const at::Tensor& targets,
                                  const FocalLossOptions& options = {});

// sum(focal_loss_elementwise) / normalizer: the reference's focal_loss() followed by a sum.
at::Tensor focal_loss(const at::Tensor& logits, const at::Tensor& targets,
                      const at::Tensor& normalizer, const FocalLossOptions& options = {});

// Dense-label form used by the detectors: one class index per anchor instead of one-hot targets.
//   logits: [..., K]; labels: [...] integer, k >= 0 positive of class k, -1 background,
//   -2 ignore (contributes nothing, as the reference's not_equal(-2) mask).
// Returns sum over non-ignored anchors and all K classes / normalizer.
// On CPU float tensors this runs one fused pass (loss and gradient together); elsewhere it is
// focal_loss_dense_composite, built from ATen ops (the same values; kept for devices and tests).
at::Tensor focal_loss_dense(const at::Tensor& logits, const at::Tensor& labels,
                            const at::Tensor& normalizer, const FocalLossOptions& options = {});
at::Tensor focal_loss_dense_composite(const at::Tensor& logits, const at::Tensor& labels,
                                      const at::Tensor& normalizer,
                                      const FocalLossOptions& options = {});

}  // namespace detseg
