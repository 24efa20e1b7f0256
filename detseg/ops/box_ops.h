// Implements: elementary box math on absolute xyxy boxes [N, 4]: area, pairwise IoU/IoA,
// clipping and pruning against a window, scaling, normalization, pad-or-clip to a fixed count.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <utility>

#include "detseg/structures/boxes.h"

namespace detseg {

// A window (x1, y1, x2, y2) in the same absolute frame as the boxes, e.g. {0, 0, W, H}.
using Window = std::array<double, 4>;

// area: [N] = (x2 - x1) * (y2 - y1). Inverted boxes give negative or zero area; use clip first.
at::Tensor box_area(const at::Tensor& boxes);

// Pairwise intersection areas [N, M] of boxes1 [N, 4] and boxes2 [M, 4] (0 when disjoint).
at::Tensor box_intersection_pairwise(const at::Tensor& boxes1, const at::Tensor& boxes2);
// Pairwise IoU [N, M], equal to torchvision.ops.box_iou (0/0 for two empty boxes gives NaN
// there; here it gives 0 so matchers never see NaN).
at::Tensor box_iou_pairwise(const at::Tensor& boxes1, const at::Tensor& boxes2);
// Pairwise intersection over the area of boxes2 [N, M] (the OD API's ioa(boxes1, boxes2));
// 0 where boxes2 has no area.
at::Tensor box_ioa_pairwise(const at::Tensor& boxes1, const at::Tensor& boxes2);

// Clamps every coordinate into the window. With filter_nonoverlapping, boxes whose clipped area is
// 0 (they lay outside the window) are removed together with their fields.
Boxes clip_to_window(const Boxes& boxes, const Window& window, bool filter_nonoverlapping = true);
at::Tensor clip_boxes(const at::Tensor& boxes, const Window& window);  // tensor-only clamp

// Keeps the boxes lying entirely inside the window (the OD API's prune_outside_window, used on
// anchors in Faster R-CNN). Returns the kept Boxes and their indices int64 [K] into the input.
std::pair<Boxes, at::Tensor> prune_outside_window(const Boxes& boxes, const Window& window);
// Keeps the boxes that overlap the window at all; returns them and their indices.
std::pair<Boxes, at::Tensor> prune_completely_outside_window(const Boxes& boxes,
                                                             const Window& window);

// Multiplies x by x_scale and y by y_scale (e.g. to map detections back to the original image).
at::Tensor scale_boxes(const at::Tensor& boxes, double y_scale, double x_scale);

// Absolute xyxy <-> coordinates divided by the image width/height (still xyxy, in [0, 1]).
at::Tensor to_normalized_coordinates(const at::Tensor& boxes, double height, double width);
at::Tensor to_absolute_coordinates(const at::Tensor& boxes, double height, double width);

// Boxes expressed in the frame of `window`: (x - wx1) / (wx2 - wx1), likewise y. The OD API's
// change_coordinate_frame, used after clipping to a padded image's true area.
at::Tensor change_coordinate_frame(const at::Tensor& boxes, const Window& window);

// Truncates to `count` rows or pads with zero rows (boxes and every field). Returns the result and
// the number of real rows (min(N, count)), so batched code can keep a static shape.
std::pair<Boxes, int64_t> pad_or_clip(const Boxes& boxes, int64_t count);

// Removes boxes whose width or height is below min_size; returns kept indices int64 [K].
at::Tensor remove_small_boxes(const at::Tensor& boxes, double min_size);

}  // namespace detseg
