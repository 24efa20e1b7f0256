#include "detseg/losses/box_losses.h"

#include <ATen/ATen.h>

#include "detseg/core/error.h"
#include "detseg/losses/huber_loss.h"
#include "detseg/ops/box_coder.h"

namespace detseg {

namespace {

// The positive anchors' rows: [P, 4] predicted and target codes, and their anchors.
struct PositiveRows {
  at::Tensor predicted, targets, anchors;
};

PositiveRows positive_rows(const BoxLossInputs& in, bool with_anchors) {
  TORCH_CHECK(in.predicted.dim() == 3 && in.predicted.size(2) == 4 && in.targets.sizes() == in.predicted.sizes() &&
                  in.positive.sizes() == in.predicted.sizes().slice(0, 2),
              "box loss: predicted and targets must be [N, A, 4] and positive [N, A], got ", in.predicted.sizes(),
              ", ", in.targets.sizes(), ", ", in.positive.sizes());
  PositiveRows rows;
  const at::Tensor mask = in.positive.to(at::kBool);
  rows.predicted = in.predicted.index({mask});
  rows.targets = in.targets.to(in.predicted.scalar_type()).index({mask});
  if (with_anchors) {
    TORCH_CHECK(in.anchors.defined() && in.anchors.dim() == 2 && in.anchors.size(0) == in.predicted.size(1),
                "box loss: a loss on decoded boxes needs the [A, 4] anchors, got ",
                in.anchors.defined() ? in.anchors.sizes() : at::IntArrayRef{});
    rows.anchors = in.anchors.to(in.predicted.scalar_type()).unsqueeze(0).expand({in.predicted.size(0), -1, -1}).index({mask});
  }
  return rows;
}

}  // namespace

at::Tensor huber_box_loss_of(const BoxLossInputs& in) {
  return huber_box_loss(in.predicted, in.targets, in.normalizer, HuberLossOptions().delta(in.huber_delta));
}

at::Tensor l1_box_loss(const BoxLossInputs& in) {
  const PositiveRows rows = positive_rows(in, false);
  return (rows.predicted - rows.targets).abs().sum() / in.normalizer;
}

at::Tensor smooth_l1_box_loss(const BoxLossInputs& in) {
  const PositiveRows rows = positive_rows(in, false);
  return smooth_l1_loss_sum(rows.predicted, rows.targets, 1.0) / in.normalizer;
}

at::Tensor giou_box_loss(const BoxLossInputs& in) {
  const PositiveRows rows = positive_rows(in, true);
  const at::Tensor p = decode_boxes(rows.predicted, rows.anchors);
  const at::Tensor t = decode_boxes(rows.targets, rows.anchors);
  const at::Tensor px1 = p.select(1, 0), py1 = p.select(1, 1), px2 = p.select(1, 2), py2 = p.select(1, 3);
  const at::Tensor tx1 = t.select(1, 0), ty1 = t.select(1, 1), tx2 = t.select(1, 2), ty2 = t.select(1, 3);
  const double eps = 1e-7;
  const at::Tensor inter =
      (at::min(px2, tx2) - at::max(px1, tx1)).clamp_min(0) * (at::min(py2, ty2) - at::max(py1, ty1)).clamp_min(0);
  const at::Tensor uni = (px2 - px1) * (py2 - py1) + (tx2 - tx1) * (ty2 - ty1) - inter;
  const at::Tensor iou = inter / (uni + eps);
  const at::Tensor hull = (at::max(px2, tx2) - at::min(px1, tx1)) * (at::max(py2, ty2) - at::min(py1, ty1));
  const at::Tensor giou = iou - (hull - uni) / (hull + eps);
  return (1 - giou).sum() / in.normalizer;
}

BoxLossFunction box_loss_function(const std::string& name) {
  static const std::pair<const char*, BoxLossFunction> kFunctions[] = {
#define DETSEG_BOX_LOSS(entry, function, default_weight, description) {entry, function},
#include "detseg/config/parts.def"
  };
  for (const auto& [entry, function] : kFunctions)
    if (name == entry) return function;
  throw ConfigError("model.box_loss: unknown box loss " + name);
}

}  // namespace detseg
