// Implements: the OD API's hard example miner (OHEM for SSD / Faster R-CNN): per image, NMS over
// per-anchor losses picks the hardest non-overlapping examples, optionally capped at a
// negatives-per-positive ratio; the losses of the selected anchors are summed.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <vector>

namespace detseg {

enum class HardMiningLoss { kClassification, kLocalization, kBoth };

struct HardExampleMinerOptions {
  int64_t num_hard_examples = 64;  // per image; <= 0 keeps as many as NMS allows
  double iou_threshold = 0.7;      // NMS over the decoded boxes, ranked by loss
  HardMiningLoss loss_type = HardMiningLoss::kBoth;
  double cls_loss_weight = 0.05;  // kBoth ranks by cls * cls_loss_weight + loc * loc_loss_weight
  double loc_loss_weight = 0.06;
  // When set (and matches are given): keep every selected positive and at most
  // max(min_negatives_per_image, floor(ratio * num_positives)) selected negatives.
  std::optional<double> max_negatives_per_positive;
  int64_t min_negatives_per_image = 0;
};

struct MinedLosses {
  at::Tensor location_loss;        // scalar: sum of the selected anchors' localization losses
  at::Tensor classification_loss;  // scalar: same for classification (both differentiable)
  std::vector<at::Tensor> selected;  // per image int64 [S] anchor indices, on the losses' device
  std::vector<int64_t> num_positives, num_negatives;  // per image (with matches)
};

// location_losses, cls_losses: [B, N] per-anchor losses; decoded_boxes: B tensors [N, 4] xyxy
// (predicted boxes); matches: empty or B int64 [N] match results (see matcher.h).
MinedLosses mine_hard_examples(const at::Tensor& location_losses, const at::Tensor& cls_losses,
                               const std::vector<at::Tensor>& decoded_boxes,
                               const HardExampleMinerOptions& options,
                               const std::vector<at::Tensor>& matches = {});

}  // namespace detseg
