// Implements: the two-stage heads' loss terms (see two_stage_loss.h).
#include "detseg/losses/two_stage_loss.h"

#include <ATen/ATen.h>

#include "detseg/losses/huber_loss.h"
#include "detseg/structures/tensor_utils.h"

namespace detseg {

at::Tensor sigmoid_cross_entropy(const at::Tensor& logits, const at::Tensor& targets) {
  const at::Tensor x = upcast_low_precision(logits);
  return at::binary_cross_entropy_with_logits(x, targets.to(x.scalar_type()), {}, {}, at::Reduction::None);
}

std::pair<at::Tensor, at::Tensor> rpn_image_loss(const at::Tensor& objectness, const at::Tensor& encodings,
                                                 const at::Tensor& positive, const at::Tensor& reg_targets,
                                                 const at::Tensor& reg_weights, const at::Tensor& sampled) {
  const at::Tensor normalizer = sampled.sum().clamp_min(1.0);
  const at::Tensor obj = (sigmoid_cross_entropy(objectness, positive.to(sampled.scalar_type())) * sampled).sum() / normalizer;
  const at::Tensor loc = huber_loss_elementwise(upcast_low_precision(encodings), reg_targets, 1.0).sum(1);
  return {(loc * sampled * reg_weights).sum() / normalizer, obj};
}

std::pair<at::Tensor, at::Tensor> box_classifier_loss(const at::Tensor& logits, const at::Tensor& codes,
                                                      const at::Tensor& cls_targets, const at::Tensor& cls_weights,
                                                      const at::Tensor& reg_targets, const at::Tensor& reg_weights,
                                                      bool sigmoid) {
  const at::Tensor x = upcast_low_precision(logits);
  const int64_t n = x.size(0), k1 = x.size(1);
  const at::Tensor ce = sigmoid ? sigmoid_cross_entropy(x, at::one_hot(cls_targets, k1).to(x.scalar_type())).sum(1)
                                : at::cross_entropy_loss(x, cls_targets, {}, at::Reduction::None);
  const at::Tensor c = upcast_low_precision(codes);
  // The target class's encoding only (background rows read class 1's; their weight is 0).
  const at::Tensor picked =
      c.size(1) == 1 ? c.select(1, 0)
                     : c.gather(1, (cls_targets - 1).clamp_min(0).view({n, 1, 1}).expand({n, 1, 4})).squeeze(1);
  return {huber_loss_elementwise(picked, reg_targets, 1.0).sum(1) * reg_weights, ce * cls_weights};
}

at::Tensor mask_loss(const at::Tensor& class_logits, const at::Tensor& targets) {
  const int64_t positives = class_logits.size(0);
  if (positives == 0) return at::zeros({}, class_logits.options().dtype(at::kFloat));
  const int64_t pixels = class_logits.size(1) * class_logits.size(2);
  return sigmoid_cross_entropy(class_logits, targets).sum() / static_cast<double>(positives * pixels);
}

}  // namespace detseg
