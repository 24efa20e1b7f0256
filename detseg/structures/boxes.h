// Implements: Boxes, the one box structure of detseg: absolute pixel xyxy boxes [N, 4] plus optional
// same-length fields (scores, classes, masks, extras) that travel with them through indexing.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

namespace detseg {

// Convention used everywhere in detseg: boxes are float tensors [N, 4] holding (x1, y1, x2, y2) in
// absolute pixels, x2 >= x1 and y2 >= y1 for valid boxes; a box covers [x1, x2) x [y1, y2), so its
// area is (x2 - x1) * (y2 - y1) (no "+1"). Other layouts appear only at the edges, via the
// converters below: COCO xywh, centre-size cxcywh, and TF-style normalized yxyx in [0, 1].
//
// Every defined field has the same first dimension as `boxes`; indexing a Boxes applies to all of
// them, the way the OD API's BoxList and detectron2's Instances behave. Undefined fields are absent.
struct Boxes {
  at::Tensor boxes;    // [N, 4] float xyxy
  at::Tensor scores;   // [N] float, optional
  at::Tensor classes;  // [N] int64, optional
  at::Tensor masks;    // [N, H, W] (or [N, ...]) optional
  // Other per-box tensors (keypoints, weights, ...), kept in insertion order; each is [N, ...].
  std::vector<std::pair<std::string, at::Tensor>> extra;

  Boxes() = default;
  // Checks boxes is a floating [N, 4] tensor (N may be 0).
  explicit Boxes(at::Tensor xyxy);

  int64_t size() const { return boxes.defined() ? boxes.size(0) : 0; }
  bool empty() const { return size() == 0; }

  // The extra field `name`; throws detseg::Error naming the known fields when it is absent.
  const at::Tensor& field(const std::string& name) const;
  bool has_field(const std::string& name) const;
  // Adds or replaces an extra field, checking its first dimension equals size().
  void set_field(const std::string& name, at::Tensor value);

  // Rows picked by `index` (int64 [K] indices or bool [N] mask) from boxes and every field.
  Boxes index(const at::Tensor& index) const;
  // The same Boxes with every field moved to `device`.
  Boxes to(const at::Device& device) const;
  // Throws detseg::Error if a field's length differs from boxes' or boxes is not [N, 4] float.
  void validate() const;
};

// Concatenates along N; all parts must carry the same set of fields.
Boxes cat(const std::vector<Boxes>& parts);

// ---- conversions at the edges (all return [N, 4] tensors of the input dtype) ----
at::Tensor xywh_to_xyxy(const at::Tensor& xywh);      // COCO (x, y, w, h)
at::Tensor xyxy_to_xywh(const at::Tensor& xyxy);
at::Tensor cxcywh_to_xyxy(const at::Tensor& cxcywh);  // (centre x, centre y, w, h)
at::Tensor xyxy_to_cxcywh(const at::Tensor& xyxy);
// Normalized (y1, x1, y2, x2) in [0, 1] of an image height x width <-> absolute xyxy.
at::Tensor normalized_yxyx_to_xyxy(const at::Tensor& yxyx, double height, double width);
at::Tensor xyxy_to_normalized_yxyx(const at::Tensor& xyxy, double height, double width);

// Throws a detseg::Error naming `what` unless t is a floating tensor [N, 4] without NaN (the NaN
// scan runs on CPU tensors only: on an accelerator it would synchronise the device).
void check_boxes(const at::Tensor& t, const char* what);

}  // namespace detseg
