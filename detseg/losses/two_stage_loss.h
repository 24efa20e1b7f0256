// Implements: the loss terms of the two-stage (Faster / Mask R-CNN) heads, as the reference computes
// them. Target assignment and sampling stay with the meta-architecture (meta_archs/faster_rcnn);
// these take its targets and return the terms, in fp32 whatever precision the heads ran in.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

namespace detseg {

// Elementwise sigmoid cross-entropy in fp32 (no reduction).
at::Tensor sigmoid_cross_entropy(const at::Tensor& logits, const at::Tensor& targets);

// One image's RPN terms over a balanced anchor sample: objectness [A] (one logit per anchor),
// encodings [A, 4] against reg_targets [A, 4] (Huber, delta 1) where reg_weights [A] is 1;
// positive [A] bool; sampled [A] 0/1 float. Each term is summed over the sampled anchors and
// divided by their number (at least 1). -> {localization, objectness}.
std::pair<at::Tensor, at::Tensor> rpn_image_loss(const at::Tensor& objectness, const at::Tensor& encodings,
                                                 const at::Tensor& positive, const at::Tensor& reg_targets,
                                                 const at::Tensor& reg_weights, const at::Tensor& sampled);

// One image's box-classifier terms per proposal, unnormalised: logits [n, K + 1] (background
// first) against cls_targets [n] (0 background) with softmax or per-class sigmoid cross-entropy,
// times cls_weights [n]; codes [n, C, 4] (C = 1 shared or K per class) whose target class's row
// meets reg_targets [n, 4] in a Huber loss (delta 1), times reg_weights [n].
// -> {localization [n], classification [n]}.
std::pair<at::Tensor, at::Tensor> box_classifier_loss(const at::Tensor& logits, const at::Tensor& codes,
                                                      const at::Tensor& cls_targets, const at::Tensor& cls_weights,
                                                      const at::Tensor& reg_targets, const at::Tensor& reg_weights,
                                                      bool sigmoid);

// Mask R-CNN: per-pixel sigmoid cross-entropy of each positive's ground-truth-class logits
// [P, S, S] against its cropped ground-truth mask [P, S, S], averaged over positives and pixels
// (0 without positives).
at::Tensor mask_loss(const at::Tensor& class_logits, const at::Tensor& targets);

}  // namespace detseg
