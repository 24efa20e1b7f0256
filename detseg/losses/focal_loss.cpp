// Implements: sigmoid focal loss as EfficientDet's det_model_fn.py computes it (stable modulator).
#include "detseg/losses/focal_loss.h"

#include <ATen/ATen.h>

#include "detseg/core/error.h"

namespace detseg {

at::Tensor focal_loss_elementwise(const at::Tensor& logits, const at::Tensor& targets,
                                  const FocalLossOptions& options) {
  TORCH_CHECK(logits.sizes() == targets.sizes(), "focal_loss: logits ", logits.sizes(),
              " and targets ", targets.sizes(), " differ in shape");
  TORCH_CHECK(logits.is_floating_point(), "focal_loss: logits must be floating point, got ",
              logits.scalar_type());
  const at::Tensor z = targets.to(logits.scalar_type());
  const double gamma = options.gamma();
  const double alpha = options.alpha();
  // sigmoid_cross_entropy_with_logits(z, x) = max(x, 0) - x z + log(1 + exp(-|x|)).
  const at::Tensor cross_entropy = at::binary_cross_entropy_with_logits(
      logits, z, /*weight=*/{}, /*pos_weight=*/{}, at::Reduction::None);
  // modulator = exp(gamma * z * (-x) - gamma * log(1 + exp(-x)))
  const at::Tensor neg_logits = logits.neg();
  const at::Tensor modulator =
      at::exp(gamma * z * neg_logits - gamma * at::softplus(neg_logits, /*beta=*/1, /*threshold=*/20));
  const at::Tensor loss = modulator * cross_entropy;
  // alpha for z == 1, 1 - alpha elsewhere (the reference's tf.where on positive_label_mask).
  const at::Tensor weight = at::where(z == 1.0, at::scalar_tensor(alpha, loss.options()),
                                      at::scalar_tensor(1.0 - alpha, loss.options()));
  return loss * weight;
}

at::Tensor focal_loss(const at::Tensor& logits, const at::Tensor& targets,
                      const at::Tensor& normalizer, const FocalLossOptions& options) {
  return focal_loss_elementwise(logits, targets, options).sum() / normalizer;
}

at::Tensor focal_loss_dense(const at::Tensor& logits, const at::Tensor& labels,
                            const at::Tensor& normalizer, const FocalLossOptions& options) {
  TORCH_CHECK(logits.dim() >= 1 && labels.dim() == logits.dim() - 1 &&
                  labels.sizes() == logits.sizes().slice(0, logits.dim() - 1),
              "focal_loss_dense: labels ", labels.sizes(), " must equal logits ", logits.sizes(),
              " without the class dimension");
  TORCH_CHECK(!labels.is_floating_point(), "focal_loss_dense: labels must be integer, got ",
              labels.scalar_type());
  const int64_t num_classes = logits.size(-1);
  if (labels.numel() > 0) {
    TORCH_CHECK(labels.max().item<int64_t>() < num_classes && labels.min().item<int64_t>() >= -2,
                "focal_loss_dense: labels must lie in [-2, ", num_classes - 1, "], got [",
                labels.min().item<int64_t>(), ", ", labels.max().item<int64_t>(), "]");
  }
  // One-hot with negative labels giving an all-zero row, like tf.one_hot.
  const at::Tensor classes = at::arange(num_classes, labels.options());
  const at::Tensor targets = (labels.unsqueeze(-1) == classes).to(logits.scalar_type());
  at::Tensor loss = focal_loss_elementwise(logits, targets, options);
  const at::Tensor keep = (labels != -2).unsqueeze(-1).to(loss.scalar_type());
  return (loss * keep).sum() / normalizer;
}

}  // namespace detseg
