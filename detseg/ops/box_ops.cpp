// Implements: area, IoU/IoA, clip/prune to window, scaling and pad-or-clip on xyxy boxes.
#include "detseg/ops/box_ops.h"

#include "detseg/core/error.h"

namespace detseg {

namespace {
void check_window(const Window& w, const char* what) {
  DETSEG_CHECK(!(std::isnan(w[0]) || std::isnan(w[1]) || std::isnan(w[2]) || std::isnan(w[3])) &&
                   w[2] >= w[0] && w[3] >= w[1],
               what, ": window must be (x1, y1, x2, y2) with x2 >= x1, y2 >= y1, got (", w[0], ", ",
               w[1], ", ", w[2], ", ", w[3], ")");
}
}  // namespace

at::Tensor box_area(const at::Tensor& boxes) {
  check_boxes(boxes, "box_area");
  return (boxes.select(1, 2) - boxes.select(1, 0)) * (boxes.select(1, 3) - boxes.select(1, 1));
}

at::Tensor box_intersection_pairwise(const at::Tensor& b1, const at::Tensor& b2) {
  check_boxes(b1, "box_intersection_pairwise(boxes1)");
  check_boxes(b2, "box_intersection_pairwise(boxes2)");
  auto lt = at::max(b1.slice(1, 0, 2).unsqueeze(1), b2.slice(1, 0, 2).unsqueeze(0));  // [N, M, 2]
  auto rb = at::min(b1.slice(1, 2, 4).unsqueeze(1), b2.slice(1, 2, 4).unsqueeze(0));
  auto wh = (rb - lt).clamp_min(0);
  return wh.select(2, 0) * wh.select(2, 1);
}

at::Tensor box_iou_pairwise(const at::Tensor& b1, const at::Tensor& b2) {
  auto inter = box_intersection_pairwise(b1, b2);
  auto uni = box_area(b1).unsqueeze(1) + box_area(b2).unsqueeze(0) - inter;
  // Same arithmetic as torchvision (inter / union); only 0/0 is redefined as 0.
  return at::where(uni > 0, inter / uni, at::zeros_like(inter));
}

at::Tensor box_ioa_pairwise(const at::Tensor& b1, const at::Tensor& b2) {
  auto inter = box_intersection_pairwise(b1, b2);
  auto a2 = box_area(b2).unsqueeze(0).expand_as(inter);
  return at::where(a2 > 0, inter / a2, at::zeros_like(inter));
}

at::Tensor clip_boxes(const at::Tensor& boxes, const Window& w) {
  check_boxes(boxes, "clip_boxes");
  check_window(w, "clip_boxes");
  auto u = boxes.unbind(1);
  return at::stack({u[0].clamp(w[0], w[2]), u[1].clamp(w[1], w[3]), u[2].clamp(w[0], w[2]),
                    u[3].clamp(w[1], w[3])},
                   1);
}

Boxes clip_to_window(const Boxes& boxes, const Window& window, bool filter_nonoverlapping) {
  Boxes out = boxes;
  out.boxes = clip_boxes(boxes.boxes, window);
  if (!filter_nonoverlapping) return out;
  return out.index(box_area(out.boxes) > 0);
}

std::pair<Boxes, at::Tensor> prune_outside_window(const Boxes& boxes, const Window& w) {
  check_boxes(boxes.boxes, "prune_outside_window");
  check_window(w, "prune_outside_window");
  auto u = boxes.boxes.unbind(1);
  auto inside = (u[0] >= w[0]) & (u[1] >= w[1]) & (u[2] <= w[2]) & (u[3] <= w[3]);
  auto idx = inside.nonzero().view(-1);
  return {boxes.index(idx), idx};
}

std::pair<Boxes, at::Tensor> prune_completely_outside_window(const Boxes& boxes, const Window& w) {
  check_boxes(boxes.boxes, "prune_completely_outside_window");
  check_window(w, "prune_completely_outside_window");
  auto u = boxes.boxes.unbind(1);
  auto outside = (u[0] >= w[2]) | (u[1] >= w[3]) | (u[2] <= w[0]) | (u[3] <= w[1]);
  auto idx = outside.logical_not().nonzero().view(-1);
  return {boxes.index(idx), idx};
}

at::Tensor scale_boxes(const at::Tensor& boxes, double y_scale, double x_scale) {
  check_boxes(boxes, "scale_boxes");
  // Column by column with host scalars: a 4-element tensor made on an accelerator would be a
  // blocking host-to-device copy per call (same values: each column times the same factor).
  auto u = boxes.unbind(1);
  return at::stack({u[0] * x_scale, u[1] * y_scale, u[2] * x_scale, u[3] * y_scale}, 1);
}

at::Tensor to_normalized_coordinates(const at::Tensor& boxes, double height, double width) {
  DETSEG_CHECK(height > 0 && width > 0, "to_normalized_coordinates: image size must be positive, got ",
               height, "x", width);
  return scale_boxes(boxes, 1.0 / height, 1.0 / width);
}

at::Tensor to_absolute_coordinates(const at::Tensor& boxes, double height, double width) {
  DETSEG_CHECK(height > 0 && width > 0, "to_absolute_coordinates: image size must be positive, got ",
               height, "x", width);
  return scale_boxes(boxes, height, width);
}

at::Tensor change_coordinate_frame(const at::Tensor& boxes, const Window& w) {
  check_boxes(boxes, "change_coordinate_frame");
  check_window(w, "change_coordinate_frame");
  double ww = w[2] - w[0], wh = w[3] - w[1];
  DETSEG_CHECK(ww > 0 && wh > 0, "change_coordinate_frame: window has no area");
  // Host scalars per column, as scale_boxes (no per-call host-to-device copy).
  auto u = boxes.unbind(1);
  return at::stack({(u[0] - w[0]) / ww, (u[1] - w[1]) / wh, (u[2] - w[0]) / ww, (u[3] - w[1]) / wh},
                   1);
}

std::pair<Boxes, int64_t> pad_or_clip(const Boxes& boxes, int64_t count) {
  DETSEG_CHECK(count >= 0, "pad_or_clip: count must be >= 0, got ", count);
  boxes.validate();
  int64_t n = boxes.size();
  int64_t valid = std::min(n, count);
  auto fit = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined()) return t;
    if (n >= count) return t.slice(0, 0, count);
    auto shape = t.sizes().vec();
    shape[0] = count - n;
    return at::cat({t, at::zeros(shape, t.options())}, 0);
  };
  Boxes out;
  out.boxes = fit(boxes.boxes);
  out.scores = fit(boxes.scores);
  out.classes = fit(boxes.classes);
  out.masks = fit(boxes.masks);
  for (const auto& kv : boxes.extra) out.extra.emplace_back(kv.first, fit(kv.second));
  return {out, valid};
}

at::Tensor remove_small_boxes(const at::Tensor& boxes, double min_size) {
  check_boxes(boxes, "remove_small_boxes");
  auto ws = boxes.select(1, 2) - boxes.select(1, 0);
  auto hs = boxes.select(1, 3) - boxes.select(1, 1);
  return ((ws >= min_size) & (hs >= min_size)).nonzero().view(-1);
}

}  // namespace detseg
