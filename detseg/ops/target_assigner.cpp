// Implements: OD API target assignment and EfficientDet's dense anchor labeling.
#include "detseg/ops/target_assigner.h"

#include "detseg/core/error.h"
#include "detseg/ops/box_ops.h"
#include "detseg/structures/boxes.h"

namespace detseg {

AssignedTargets assign_targets(const at::Tensor& anchors, const at::Tensor& gt_boxes,
                               const at::Tensor& gt_labels, const at::Tensor& unmatched_class_label,
                               const TargetAssignerOptions& o, const at::Tensor& gt_weights_in) {
  check_boxes(anchors, "assign_targets(anchors)");
  check_boxes(gt_boxes, "assign_targets(gt_boxes)");
  DETSEG_CHECK(gt_labels.defined() && gt_labels.dim() >= 1 && gt_labels.size(0) == gt_boxes.size(0),
               "assign_targets: expected gt_labels [", gt_boxes.size(0), ", ...], got ",
               gt_labels.defined() ? gt_labels.sizes() : at::IntArrayRef{});
  const int64_t m = gt_boxes.size(0);
  auto fopts = anchors.options();
  at::Tensor gt_weights = gt_weights_in.defined() ? gt_weights_in.to(fopts) : at::ones({m}, fopts);
  DETSEG_CHECK(gt_weights.dim() == 1 && gt_weights.size(0) == m, "assign_targets: expected gt_weights [",
               m, "], got ", gt_weights.sizes());

  AssignedTargets t;
  t.match = argmax_match(box_iou_pairwise(gt_boxes.to(fopts), anchors), o.matcher);
  auto zero = at::zeros({}, fopts);
  auto matched_boxes = gather_by_match(gt_boxes.to(fopts), t.match, at::zeros({4}, fopts),
                                       at::zeros({4}, fopts));  // [N, 4]
  auto is_matched = (t.match >= 0).unsqueeze(1);
  t.reg_targets = at::where(is_matched, encode_boxes(matched_boxes, anchors, o.coder),
                            at::zeros({}, fopts));
  t.cls_targets = gather_by_match(gt_labels, t.match, unmatched_class_label, unmatched_class_label);
  t.reg_weights = gather_by_match(gt_weights, t.match, zero, zero);
  t.cls_weights = gather_by_match(gt_weights, t.match,
                                  at::full({}, o.negative_class_weight, fopts), zero);
  return t;
}

DenseTargets label_anchors(const at::Tensor& anchors,
                           const std::vector<std::pair<int64_t, int64_t>>& level_sizes,
                           int64_t anchors_per_location, const at::Tensor& gt_boxes,
                           const at::Tensor& gt_classes, const AnchorLabelerOptions& lo) {
  DETSEG_CHECK(gt_classes.defined() && gt_classes.dim() == 1 &&
                   !at::isFloatingType(gt_classes.scalar_type()),
               "label_anchors: expected integer gt_classes [M], got ",
               gt_classes.defined() ? gt_classes.sizes() : at::IntArrayRef{});
  int64_t total = 0;
  for (const auto& hw : level_sizes) total += hw.first * hw.second * anchors_per_location;
  DETSEG_CHECK(total == anchors.size(0), "label_anchors: levels describe ", total,
               " anchors but ", anchors.size(0), " were given");
  TargetAssignerOptions o;
  o.matcher.matched_threshold = lo.match_threshold;
  o.matcher.unmatched_threshold = lo.unmatched_threshold;
  o.matcher.negatives_lower_than_unmatched = true;
  o.matcher.force_match_for_each_row = true;
  auto labels = gt_classes.to(anchors.device(), at::kLong);
  auto a = assign_targets(anchors, gt_boxes, labels, at::full({}, -1, labels.options()), o);
  // Ignored anchors get -2 so the loss can mask them (the reference's convention).
  auto cls = a.cls_targets.masked_fill(a.match == kMatchIgnored, -2);
  DenseTargets d;
  int64_t start = 0;
  for (const auto& hw : level_sizes) {
    const int64_t count = hw.first * hw.second * anchors_per_location;
    d.cls_targets.push_back(cls.slice(0, start, start + count).view({hw.first, hw.second, -1}));
    d.box_targets.push_back(
        a.reg_targets.slice(0, start, start + count).reshape({hw.first, hw.second, -1}));
    start += count;
  }
  d.num_positives = (a.match >= 0).sum().to(anchors.scalar_type());
  d.match = a.match;
  return d;
}

}  // namespace detseg
