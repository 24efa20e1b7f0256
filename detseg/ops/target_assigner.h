// Implements: target assignment (anchors -> class/box targets and weights via IoU, the argmax
// matcher and the Faster R-CNN coder) and EfficientDet's dense per-level anchor labeler.
#pragma once

#include <ATen/ATen.h>

#include <utility>
#include <vector>

#include "detseg/ops/box_coder.h"
#include "detseg/ops/matcher.h"

namespace detseg {

struct TargetAssignerOptions {
  ArgMaxMatcherOptions matcher;
  BoxCoderOptions coder;
  double negative_class_weight = 1.0;  // class weight of unmatched anchors (ignored get 0)
};

struct AssignedTargets {
  at::Tensor cls_targets;  // [N, ...]: gt label of the match; unmatched_class_label otherwise
  at::Tensor cls_weights;  // [N] float: gt weight if matched, negative_class_weight if unmatched,
                           //           0 if ignored
  at::Tensor reg_targets;  // [N, 4] (ty, tx, th, tw) codes; 0 where not matched
  at::Tensor reg_weights;  // [N] float: gt weight if matched, else 0
  at::Tensor match;        // [N] int64, see matcher.h
};

// The OD API's TargetAssigner.assign on one image. anchors [N, 4] xyxy, gt_boxes [M, 4] xyxy,
// gt_labels [M, ...] (int64 ids [M] or float one-hot [M, K]); unmatched_class_label broadcasts to
// one label's shape (e.g. scalar 0, or a one-hot background row). gt_weights: optional [M],
// default 1. M may be 0 (everything unmatched).
AssignedTargets assign_targets(const at::Tensor& anchors, const at::Tensor& gt_boxes,
                               const at::Tensor& gt_labels, const at::Tensor& unmatched_class_label,
                               const TargetAssignerOptions& options,
                               const at::Tensor& gt_weights = {});

struct AnchorLabelerOptions {
  double match_threshold = 0.5;
  double unmatched_threshold = 0.5;  // < match_threshold creates an ignore band (-2)
};

struct DenseTargets {
  // Per level (min_level first): cls [H_l, W_l, A] int64 with the 0-based class id, -1 for
  // background and -2 for ignored anchors; box [H_l, W_l, A * 4] (ty, tx, th, tw) codes.
  std::vector<at::Tensor> cls_targets;
  std::vector<at::Tensor> box_targets;
  at::Tensor num_positives;  // float scalar: anchors matched to a box (the loss normaliser)
  at::Tensor match;          // [N] int64 over all anchors
};

// EfficientDet's AnchorLabeler.label_anchors: IoU, argmax matcher (thresholds as given,
// negatives below unmatched, forced match for each box), unscaled Faster R-CNN codes.
// anchors [N, 4] from multilevel_anchors(); level_sizes/anchors_per_location describe how N splits
// into levels; gt_boxes [M, 4] xyxy; gt_classes int64 [M] 0-based.
DenseTargets label_anchors(const at::Tensor& anchors,
                           const std::vector<std::pair<int64_t, int64_t>>& level_sizes,
                           int64_t anchors_per_location, const at::Tensor& gt_boxes,
                           const at::Tensor& gt_classes, const AnchorLabelerOptions& options = {});

}  // namespace detseg
