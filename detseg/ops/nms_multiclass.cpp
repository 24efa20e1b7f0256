// Implements: multi-class NMS with the OD API's options (single image and padded batch) and top-k
// pre-selection of (anchor, class) pairs across levels.
#include "detseg/core/error.h"
#include "detseg/ops/nms.h"

namespace detseg {

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

  std::vector<at::Tensor> rows, out_scores, out_classes, out_boxes, out_masks;
  for (int64_t c = 0; c < num_classes; ++c) {
    const int64_t q = per_class && boxes.size(1) > 1 ? c : 0;
    at::Tensor class_boxes = per_class ? boxes.select(1, q) : boxes;
    at::Tensor class_scores = scores.select(1, c);
    at::Tensor idx = (class_scores > opt.score_threshold).nonzero().view(-1);
    at::Tensor b = class_boxes.index_select(0, idx);
    at::Tensor s = class_scores.index_select(0, idx);
    if (opt.clip_window) {
      b = clip_boxes(b, *opt.clip_window);
      auto nonempty = (box_area(b) > 0).nonzero().view(-1);
      idx = idx.index_select(0, nonempty);
      b = b.index_select(0, nonempty);
      s = s.index_select(0, nonempty);
    }
    at::Tensor keep;
    if (opt.soft_nms_sigma > 0) {
      SoftNmsOptions so;
      so.method = SoftNmsMethod::kGaussian;
      so.sigma = opt.soft_nms_sigma;
      so.iou_threshold = opt.iou_threshold;
      so.score_threshold = opt.score_threshold;
      so.max_output = opt.max_per_class > 0 ? opt.max_per_class : -1;
      auto r = soft_nms(b, s, so);
      keep = r.indices;
      s = r.scores.to(s.dtype());
    } else {
      keep = nms(b, s, opt.iou_threshold);
      if (opt.max_per_class > 0) keep = keep.slice(0, 0, opt.max_per_class);
      s = s.index_select(0, keep);
    }
    auto src = idx.index_select(0, keep);
    rows.push_back(src);
    out_scores.push_back(s);
    out_boxes.push_back(b.index_select(0, keep));
    out_classes.push_back(at::full({src.size(0)}, c, src.options()));
    if (masks.defined())
      out_masks.push_back(per_class_masks
                              ? masks.select(1, masks.size(1) > 1 ? c : 0).index_select(0, src)
                              : masks.index_select(0, src));
  }
  Boxes out;
  at::Tensor all_scores = at::cat(out_scores, 0);
  at::Tensor order = std::get<1>(all_scores.sort(/*stable=*/true, 0, /*descending=*/true));
  if (opt.max_total > 0) order = order.slice(0, 0, opt.max_total);
  out.boxes = at::cat(out_boxes, 0).index_select(0, order);
  if (opt.change_coordinate_frame) out.boxes = change_coordinate_frame(out.boxes, *opt.clip_window);
  out.scores = all_scores.index_select(0, order);
  out.classes = at::cat(out_classes, 0).index_select(0, order);
  if (masks.defined()) out.masks = at::cat(out_masks, 0).index_select(0, order);
  out.set_field("indices", at::cat(rows, 0).index_select(0, order));
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
