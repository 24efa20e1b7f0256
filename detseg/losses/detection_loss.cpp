#include "detseg/losses/detection_loss.h"

#include <ATen/ATen.h>

#include "detseg/losses/focal_loss.h"
#include "detseg/structures/tensor_utils.h"

namespace detseg {

DetectionLosses detection_loss(const at::Tensor& cls_logits_in, const at::Tensor& box_regression_in,
                               const at::Tensor& cls_targets, const at::Tensor& box_targets,
                               const DetectionLossOptions& options, const at::Tensor& anchors) {
  // fp32 under autocast: a bf16 num_positives would not even count past 256 exactly.
  const at::Tensor cls_logits = upcast_low_precision(cls_logits_in);
  const at::Tensor box_regression = upcast_low_precision(box_regression_in);
  TORCH_CHECK(cls_logits.dim() == 3, "detection_loss: cls_logits must be [N, A, K], got ",
              cls_logits.sizes());
  TORCH_CHECK(box_regression.dim() == 3 && box_regression.size(2) == 4 &&
                  box_regression.size(0) == cls_logits.size(0) &&
                  box_regression.size(1) == cls_logits.size(1),
              "detection_loss: box_regression must be [N, A, 4] matching cls_logits ",
              cls_logits.sizes(), ", got ", box_regression.sizes());
  TORCH_CHECK(cls_targets.sizes() == cls_logits.sizes().slice(0, 2),
              "detection_loss: cls_targets must be [N, A] = ", cls_logits.sizes().slice(0, 2),
              ", got ", cls_targets.sizes());
  TORCH_CHECK(box_targets.sizes() == box_regression.sizes(),
              "detection_loss: box_targets must be ", box_regression.sizes(), ", got ",
              box_targets.sizes());
  DetectionLosses out;
  // Positives summed over the batch, + 1 so an image without objects does not divide by zero.
  out.num_positives = (cls_targets >= 0).sum().to(cls_logits.scalar_type()) + 1.0;
  const at::Tensor normalizer = out.num_positives.detach();
  out.cls = focal_loss_dense(cls_logits, cls_targets, normalizer,
                             FocalLossOptions().alpha(options.alpha()).gamma(options.gamma()));
  BoxLossInputs box;
  box.predicted = box_regression;
  box.targets = box_targets;
  box.positive = cls_targets >= 0;
  box.anchors = anchors;
  box.normalizer = normalizer;
  box.huber_delta = options.delta();
  out.box = options.box_loss()(box);
  out.total = out.cls + options.box_loss_weight() * out.box;
  return out;
}

DetectionLosses detection_loss(const std::vector<at::Tensor>& cls_logits,
                               const std::vector<at::Tensor>& box_regression,
                               const std::vector<at::Tensor>& cls_targets,
                               const std::vector<at::Tensor>& box_targets,
                               const DetectionLossOptions& options, const at::Tensor& anchors) {
  TORCH_CHECK(!cls_logits.empty() && cls_logits.size() == box_regression.size() &&
                  cls_logits.size() == cls_targets.size() &&
                  cls_logits.size() == box_targets.size(),
              "detection_loss: need the same non-zero number of levels in every input, got ",
              cls_logits.size(), ", ", box_regression.size(), ", ", cls_targets.size(), ", ",
              box_targets.size());
  return detection_loss(at::cat(cls_logits, 1), at::cat(box_regression, 1), at::cat(cls_targets, 1),
                        at::cat(box_targets, 1), options, anchors);
}

}  // namespace detseg
