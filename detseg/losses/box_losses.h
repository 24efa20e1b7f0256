// Implements: the dense detectors' box regression losses that model.box_loss chooses from (one
// DETSEG_BOX_LOSS line each in config/parts.def): the reference's Huber on the box codes and
// torchvision's RetinaNet losses (L1 and smooth L1 on the codes, generalized IoU of the decoded
// boxes). Each returns the unweighted loss; detection_loss adds box_loss_weight times it.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace detseg {

struct BoxLossInputs {
  at::Tensor predicted;   // [N, A, 4] box codes the network predicts (fp32)
  at::Tensor targets;     // [N, A, 4] the matched boxes' codes, zero for non-positive anchors
  at::Tensor positive;    // [N, A] bool: anchors matched to an object
  at::Tensor anchors;     // [A, 4] xyxy, the codes' reference (needed by losses on decoded boxes)
  at::Tensor normalizer;  // scalar: positives in the batch + 1
  double huber_delta = 0.1;
};

// The reference's _box_loss: Huber over the non-zero target elements / (4 x normalizer).
at::Tensor huber_box_loss_of(const BoxLossInputs& in);
// torchvision's "l1": sum of |predicted - target| over positive anchors' codes / normalizer.
at::Tensor l1_box_loss(const BoxLossInputs& in);
// torchvision's "smooth_l1" (beta 1, as its RetinaNet passes no beta): summed over positive
// anchors' codes / normalizer.
at::Tensor smooth_l1_box_loss(const BoxLossInputs& in);
// torchvision's "giou": sum over positive anchors of 1 - GIoU(decoded prediction, decoded target)
// / normalizer (torchvision.ops.generalized_box_iou_loss, eps 1e-7).
at::Tensor giou_box_loss(const BoxLossInputs& in);

using BoxLossFunction = at::Tensor (*)(const BoxLossInputs&);
// model.box_loss's function; throws ConfigError for a name not in the table.
BoxLossFunction box_loss_function(const std::string& name);

}  // namespace detseg
