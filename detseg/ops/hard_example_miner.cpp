// Implements: hard example mining by NMS over losses with a negatives-per-positive cap.
#include "detseg/ops/hard_example_miner.h"

#include "detseg/core/error.h"
#include "detseg/ops/matcher.h"
#include "detseg/ops/nms.h"
#include "detseg/structures/tensor_utils.h"

namespace detseg {

MinedLosses mine_hard_examples(const at::Tensor& loc, const at::Tensor& cls,
                               const std::vector<at::Tensor>& boxes,
                               const HardExampleMinerOptions& o,
                               const std::vector<at::Tensor>& matches) {
  DETSEG_CHECK(loc.defined() && cls.defined() && loc.dim() == 2 && loc.sizes() == cls.sizes(),
               "mine_hard_examples: expected location and classification losses of equal shape "
               "[B, N], got ",
               loc.defined() ? loc.sizes() : at::IntArrayRef{}, " and ",
               cls.defined() ? cls.sizes() : at::IntArrayRef{});
  const int64_t batch = loc.size(0), n = loc.size(1);
  DETSEG_CHECK(static_cast<int64_t>(boxes.size()) == batch, "mine_hard_examples: ", boxes.size(),
               " box tensors for a batch of ", batch);
  DETSEG_CHECK(matches.empty() || static_cast<int64_t>(matches.size()) == batch,
               "mine_hard_examples: ", matches.size(), " match tensors for a batch of ", batch);
  MinedLosses out;
  std::vector<at::Tensor> loc_sel, cls_sel;
  for (int64_t b = 0; b < batch; ++b) {
    DETSEG_CHECK(boxes[b].dim() == 2 && boxes[b].size(0) == n, "mine_hard_examples: image ", b,
                 " has boxes ", boxes[b].sizes(), " for ", n, " anchors");
    at::Tensor rank;  // what "hard" means, without gradient
    switch (o.loss_type) {
      case HardMiningLoss::kClassification: rank = cls[b]; break;
      case HardMiningLoss::kLocalization: rank = loc[b]; break;
      case HardMiningLoss::kBoth: rank = cls[b] * o.cls_loss_weight + loc[b] * o.loc_loss_weight;
    }
    // The selection is a sequential host algorithm (greedy NMS, then a running count): its inputs
    // are copied to the CPU once per image, it runs there, and only the chosen indices go back to
    // the losses' device (one copy each way instead of a sync per step).
    // (bf16/fp16 inputs are upcast: the CPU NMS runs on float or double.)
    const at::Tensor boxes_c = upcast_low_precision(boxes[b].detach()).to(at::kCPU);
    const at::Tensor rank_c = upcast_low_precision(rank.detach()).to(at::kCPU);
    at::Tensor sel = nms(boxes_c, rank_c, o.iou_threshold);
    if (o.num_hard_examples > 0) sel = sel.slice(0, 0, o.num_hard_examples);
    if (!matches.empty()) {
      const auto& m_in = matches[b];
      DETSEG_CHECK(m_in.dim() == 1 && m_in.size(0) == n, "mine_hard_examples: image ", b,
                   " has a match of shape ", m_in.sizes(), " for ", n, " anchors");
      const at::Tensor m = m_in.to(at::kCPU);
      auto msel = m.index_select(0, sel);
      auto pos = msel >= 0, neg = msel == kMatchUnmatched;
      const int64_t num_pos = pos.sum().item<int64_t>();
      if (o.max_negatives_per_positive) {
        const int64_t max_neg = std::max<int64_t>(
            o.min_negatives_per_image,
            static_cast<int64_t>(*o.max_negatives_per_positive * double(num_pos)));
        // As in the OD API: keep positives, and anything while the running count of negatives is
        // within the cap (selected ignored anchors ride along).
        auto keep = pos | (neg.to(at::kLong).cumsum(0) <= max_neg);
        sel = sel.index_select(0, keep.nonzero().view(-1));
        msel = m.index_select(0, sel);
      }
      out.num_positives.push_back((msel >= 0).sum().item<int64_t>());
      out.num_negatives.push_back(sel.size(0) - out.num_positives.back());
    }
    sel = sel.to(loc.device());
    loc_sel.push_back(loc[b].index_select(0, sel));
    cls_sel.push_back(cls[b].index_select(0, sel));
    out.selected.push_back(sel);
  }
  out.location_loss = batch ? at::cat(loc_sel).sum() : at::zeros({}, loc.options());
  out.classification_loss = batch ? at::cat(cls_sel).sum() : at::zeros({}, cls.options());
  return out;
}

}  // namespace detseg
