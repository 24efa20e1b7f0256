// Implements: multi-class NMS with the OD API's options (single image and padded batch) and top-k
// pre-selection of (anchor, class) pairs across levels.
#include "detseg/core/error.h"
#include "detseg/ops/nms.h"

namespace detseg {

namespace {

// Every (class, row) pair whose score passes the threshold, class-major (class, then row), with its
// box (clipped, pairs left without area dropped) and score: one gather for all classes instead of
// a loop of small ops and host syncs per class. Class-major order makes the ties of the stable
// score sorts below fall as the per-class formulation has them: lower class, then lower row.
struct Candidates {
  at::Tensor rows, classes, boxes, scores;
};

Candidates gather_candidates(const at::Tensor& boxes, const at::Tensor& scores,
                             const MultiClassNmsOptions& opt) {
  const int64_t num_classes = scores.size(1);
  auto pairs = (scores.t() > opt.score_threshold).nonzero();  // [M, 2] (class, row)
  Candidates c;
  c.classes = pairs.select(1, 0).contiguous();
  c.rows = pairs.select(1, 1).contiguous();
  if (boxes.dim() == 3) {
    const int64_t box_columns = boxes.size(1);
    auto column = box_columns > 1 ? c.classes : at::zeros_like(c.classes);
    c.boxes = boxes.reshape({-1, 4}).index_select(0, c.rows * box_columns + column);
  } else {
    c.boxes = boxes.index_select(0, c.rows);
  }
  c.scores = scores.reshape({-1}).index_select(0, c.rows * num_classes + c.classes);
  if (opt.clip_window) {
    c.boxes = clip_boxes(c.boxes, *opt.clip_window);
    auto nonempty = (box_area(c.boxes) > 0).nonzero().view(-1);
    c.rows = c.rows.index_select(0, nonempty);
    c.classes = c.classes.index_select(0, nonempty);
    c.boxes = c.boxes.index_select(0, nonempty);
    c.scores = c.scores.index_select(0, nonempty);
  }
  return c;
}

// Positions of `keep` (candidate indices in decreasing score order) that are among the first
// `limit` of their class, in the same order; on the candidates' device without a loop over classes.
at::Tensor first_per_class(const at::Tensor& keep, const at::Tensor& classes, int64_t limit) {
  const int64_t k = keep.size(0);
  if (k == 0) return keep;
  auto kept_classes = classes.index_select(0, keep);
  auto by_class = std::get<1>(kept_classes.sort(/*stable=*/true, 0, /*descending=*/false));
  auto sorted_classes = kept_classes.index_select(0, by_class);
  // Rank within the class: position minus the position where the class's run starts.
  auto rank = at::arange(k, keep.options()) - at::searchsorted(sorted_classes, sorted_classes);
  auto taken = std::get<0>(by_class.masked_select(rank < limit).sort());
  return keep.index_select(0, taken);
}

}  // namespace

Boxes multiclass_nms(const at::Tensor& boxes, const at::Tensor& scores,
                     const MultiClassNmsOptions& opt, const at::Tensor& masks) {
  DETSEG_CHECK(scores.defined() && scores.dim() == 2, "multiclass_nms: expected scores [N, C], got ",
               scores.defined() ? scores.sizes() : at::IntArrayRef{});
  const int64_t n = scores.size(0), num_classes = scores.size(1);
  DETSEG_CHECK(boxes.defined() && ((boxes.dim() == 2 && boxes.size(1) == 4) ||
                                   (boxes.dim() == 3 && boxes.size(2) == 4)),
               "multiclass_nms: expected boxes [N, 4] or [N, C, 4], got ",
               boxes.defined() ? boxes.sizes() : at::IntArrayRef{});
  DETSEG_CHECK(boxes.size(0) == n, "multiclass_nms: ", boxes.size(0), " boxes but ", n,
               " score rows");
  const bool per_class = boxes.dim() == 3;
  DETSEG_CHECK(!per_class || boxes.size(1) == num_classes || boxes.size(1) == 1,
               "multiclass_nms: boxes have ", boxes.size(1), " class columns, scores ", num_classes);
  DETSEG_CHECK(!opt.change_coordinate_frame || opt.clip_window.has_value(),
               "multiclass_nms: change_coordinate_frame needs a clip_window");
  const bool per_class_masks = masks.defined() && per_class && masks.dim() >= 2 &&
                               masks.size(1) == boxes.size(1) && masks.dim() >= 4;
  if (masks.defined())
    DETSEG_CHECK(masks.size(0) == n, "multiclass_nms: ", masks.size(0), " masks for ", n, " boxes");

  const Candidates c = gather_candidates(boxes, scores, opt);
  // selected: candidate indices; selected_scores: their (for soft-NMS decayed) scores.
  at::Tensor selected, selected_scores;
  if (opt.soft_nms_sigma > 0 && opt.class_agnostic) {
    SoftNmsOptions so;
    so.method = SoftNmsMethod::kGaussian;
    so.sigma = opt.soft_nms_sigma;
    so.iou_threshold = opt.iou_threshold;
    so.score_threshold = opt.score_threshold;
    auto r = soft_nms(c.boxes, c.scores, so);
    selected = r.indices;
    selected_scores = r.scores.to(c.scores.dtype());
    if (opt.max_per_class > 0) {
      const auto keep = first_per_class(at::arange(selected.size(0), selected.options()), c.classes.index_select(0, selected),
                                        opt.max_per_class);
      selected = selected.index_select(0, keep);
      selected_scores = selected_scores.index_select(0, keep);
    }
  } else if (opt.soft_nms_sigma > 0) {
    // Soft-NMS is sequential per class: run it on each class's run of the class-major candidates.
    SoftNmsOptions so;
    so.method = SoftNmsMethod::kGaussian;
    so.sigma = opt.soft_nms_sigma;
    so.iou_threshold = opt.iou_threshold;
    so.score_threshold = opt.score_threshold;
    so.max_output = opt.max_per_class > 0 ? opt.max_per_class : -1;
    auto counts = at::bincount(c.classes, {}, num_classes).cpu();
    std::vector<at::Tensor> picked, picked_scores;
    int64_t start = 0;
    for (int64_t cls = 0; cls < num_classes; ++cls) {
      const int64_t count = counts[cls].item<int64_t>();
      auto r = soft_nms(c.boxes.slice(0, start, start + count), c.scores.slice(0, start, start + count),
                        so);
      picked.push_back(r.indices + start);
      picked_scores.push_back(r.scores.to(c.scores.dtype()));
      start += count;
    }
    selected = at::cat(picked, 0);
    selected_scores = at::cat(picked_scores, 0);
  } else {
    selected = opt.class_agnostic ? nms(c.boxes, c.scores, opt.iou_threshold)
                                  : batched_nms(c.boxes, c.scores, c.classes, opt.iou_threshold);
    if (opt.max_per_class > 0) selected = first_per_class(selected, c.classes, opt.max_per_class);
    selected_scores = c.scores.index_select(0, selected);
  }
  at::Tensor order =
      std::get<1>(selected_scores.sort(/*stable=*/true, 0, /*descending=*/true));
  if (opt.max_total > 0) order = order.slice(0, 0, opt.max_total);
  const auto picked = selected.index_select(0, order);
  const auto rows = c.rows.index_select(0, picked);
  Boxes out;
  out.boxes = c.boxes.index_select(0, picked);
  if (opt.change_coordinate_frame) out.boxes = change_coordinate_frame(out.boxes, *opt.clip_window);
  out.scores = selected_scores.index_select(0, order);
  out.classes = c.classes.index_select(0, picked);
  if (masks.defined()) {
    if (per_class_masks && masks.size(1) > 1)
      out.masks = masks.flatten(0, 1).index_select(0, rows * masks.size(1) + out.classes);
    else
      out.masks = (per_class_masks ? masks.select(1, 0) : masks).index_select(0, rows);
  }
  out.set_field("indices", rows);
  return out;
}

BatchDetections batch_multiclass_nms(const at::Tensor& boxes, const at::Tensor& scores,
                                     const MultiClassNmsOptions& opt,
                                     const at::Tensor& num_valid_boxes, const at::Tensor& masks) {
  DETSEG_CHECK(scores.defined() && scores.dim() == 3,
               "batch_multiclass_nms: expected scores [B, N, C], got ",
               scores.defined() ? scores.sizes() : at::IntArrayRef{});
  DETSEG_CHECK(boxes.defined() && (boxes.dim() == 3 || boxes.dim() == 4) &&
                   boxes.size(0) == scores.size(0),
               "batch_multiclass_nms: expected boxes [B, N, 4] or [B, N, C, 4] with B = ",
               scores.size(0), ", got ", boxes.defined() ? boxes.sizes() : at::IntArrayRef{});
  DETSEG_CHECK(opt.max_total > 0, "batch_multiclass_nms: max_total must be > 0, got ",
               opt.max_total);
  const int64_t batch = scores.size(0), n = scores.size(1), total = opt.max_total;
  at::Tensor valid;
  if (num_valid_boxes.defined()) {
    DETSEG_CHECK(num_valid_boxes.dim() == 1 && num_valid_boxes.size(0) == batch,
                 "batch_multiclass_nms: expected num_valid_boxes [", batch, "], got ",
                 num_valid_boxes.sizes());
    valid = num_valid_boxes.to(at::kCPU, at::kLong);
  }
  BatchDetections out;
  out.boxes = at::zeros({batch, total, 4}, boxes.options());
  out.scores = at::zeros({batch, total}, scores.options());
  out.classes = at::zeros({batch, total}, scores.options().dtype(at::kLong));
  out.num_detections = at::zeros({batch}, at::TensorOptions(at::kLong));
  if (masks.defined()) {
    auto shape = masks.sizes().vec();
    shape.erase(shape.begin(), shape.begin() + (boxes.dim() == 4 && masks.dim() >= 5 ? 3 : 2));
    shape.insert(shape.begin(), {batch, total});
    out.masks = at::zeros(shape, masks.options());
  }
  for (int64_t b = 0; b < batch; ++b) {
    int64_t nb = valid.defined() ? std::clamp<int64_t>(valid[b].item<int64_t>(), 0, n) : n;
    auto det = multiclass_nms(boxes[b].slice(0, 0, nb), scores[b].slice(0, 0, nb), opt,
                              masks.defined() ? masks[b].slice(0, 0, nb) : at::Tensor());
    const int64_t k = det.size();
    out.boxes[b].slice(0, 0, k).copy_(det.boxes);
    out.scores[b].slice(0, 0, k).copy_(det.scores);
    out.classes[b].slice(0, 0, k).copy_(det.classes);
    if (masks.defined()) out.masks[b].slice(0, 0, k).copy_(det.masks);
    out.num_detections[b] = k;
  }
  out.num_detections = out.num_detections.to(scores.device());
  return out;
}

TopK select_top_k(const at::Tensor& scores, int64_t k) {
  DETSEG_CHECK(scores.defined() && scores.dim() == 3, "select_top_k: expected scores [B, N, K], got ",
               scores.defined() ? scores.sizes() : at::IntArrayRef{});
  DETSEG_CHECK(k > 0, "select_top_k: k must be > 0, got ", k);
  const int64_t num_classes = scores.size(2);
  auto flat = scores.reshape({scores.size(0), -1});  // [B, N*K]
  k = std::min(k, flat.size(1));
  auto top = flat.topk(k, /*dim=*/1, /*largest=*/true, /*sorted=*/true);
  TopK r;
  r.scores = std::get<0>(top);
  auto idx = std::get<1>(top);
  r.anchor_indices = idx.div(num_classes, "floor");
  r.classes = idx.remainder(num_classes);
  return r;
}

TopK select_top_k(const std::vector<at::Tensor>& level_scores, int64_t k) {
  DETSEG_CHECK(!level_scores.empty(), "select_top_k: no levels given");
  return select_top_k(at::cat(level_scores, 1), k);
}

}  // namespace detseg
