// Implements: box regression losses: the reference's masked Huber loss and smooth L1.
#include "detseg/losses/huber_loss.h"

#include <ATen/ATen.h>

#include "detseg/structures/tensor_utils.h"

namespace detseg {

namespace {
void check_same_shape(const char* what, const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.sizes() == b.sizes(), what, ": outputs ", a.sizes(), " and targets ", b.sizes(),
              " differ in shape");
  TORCH_CHECK(a.is_floating_point(), what, ": outputs must be floating point, got ",
              a.scalar_type());
}
}  // namespace

at::Tensor huber_loss_elementwise(const at::Tensor& outputs_in, const at::Tensor& targets,
                                  double delta) {
  check_same_shape("huber_loss", outputs_in, targets);
  const at::Tensor outputs = upcast_low_precision(outputs_in);  // fp32 under autocast
  TORCH_CHECK(delta > 0, "huber_loss: delta must be > 0, got ", delta);
  // at::huber_loss uses the same definition as TF's (not divided by delta).
  return at::huber_loss(outputs, targets.to(outputs.scalar_type()), at::Reduction::None, delta);
}

at::Tensor huber_box_loss(const at::Tensor& outputs_in, const at::Tensor& targets,
                          const at::Tensor& num_positives_in, const HuberLossOptions& options) {
  check_same_shape("huber_box_loss", outputs_in, targets);
  const at::Tensor outputs = upcast_low_precision(outputs_in);  // fp32 under autocast
  const at::Tensor num_positives = upcast_low_precision(num_positives_in);
  const at::Tensor mask = (targets != 0).to(outputs.scalar_type());
  const at::Tensor loss = huber_loss_elementwise(outputs, targets, options.delta()) * mask;
  return loss.sum() / (num_positives * 4.0);
}

at::Tensor smooth_l1_loss_sum(const at::Tensor& outputs_in, const at::Tensor& targets, double beta) {
  check_same_shape("smooth_l1_loss", outputs_in, targets);
  const at::Tensor outputs = upcast_low_precision(outputs_in);  // fp32 under autocast
  TORCH_CHECK(beta >= 0, "smooth_l1_loss: beta must be >= 0, got ", beta);
  const at::Tensor t = targets.to(outputs.scalar_type());
  if (beta == 0) return (outputs - t).abs().sum();
  return at::smooth_l1_loss(outputs, t, at::Reduction::Sum, beta);
}

}  // namespace detseg
