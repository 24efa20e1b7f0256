// Implements: the typed structs that flow through the data pipeline. A reader + decode make an
// Example, transforms change it (and record how in its geometry), the loader collates Examples
// into a Batch. Models and trainers only ever see these two structs.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace detseg {

// Per-axis affine map from original image pixels to current pixels: x' = scale_x * x + offset_x.
// A horizontal flip makes scale_x negative. Continuous coordinates: pixel i spans [i, i+1).
struct ImageGeometry {
  double scale_x = 1, scale_y = 1;
  double offset_x = 0, offset_y = 0;

  // This map followed by `next`.
  ImageGeometry then(const ImageGeometry& next) const;
  // The resize factor (EfficientDet's "image_scale"): current pixels per original pixel.
  double scale() const { return scale_x < 0 ? -scale_x : scale_x; }
  bool flipped() const { return scale_x < 0; }
};

// Applies `g` to boxes: [N, 4] xyxy (any float dtype, any device); keeps x1 <= x2 under flips.
at::Tensor geometry_apply_boxes(const ImageGeometry& g, const at::Tensor& boxes);
// Maps boxes in current pixels back to original pixels (the inverse of geometry_apply_boxes).
at::Tensor geometry_invert_boxes(const ImageGeometry& g, const at::Tensor& boxes);

// One image with its annotations. Optional fields are undefined tensors when absent.
struct Example {
  at::Tensor image;      // [3, H, W] uint8 RGB after decode/transforms (float once normalized)
  at::Tensor boxes;      // [N, 4] float32 xyxy absolute pixels of `image`
  at::Tensor classes;    // [N] int64 contiguous labels 0..K-1
  at::Tensor iscrowd;    // [N] bool (crowd regions: ignored in matching, kept for eval)
  at::Tensor masks;      // optional [N, H, W] uint8 0/1 instance masks
  at::Tensor label_map;  // optional [H, W] uint8 class per pixel, 255 = ignore
  int64_t image_id = -1;             // id from the annotation file (COCO image id)
  int64_t original_height = 0;       // decoded image size before any transform
  int64_t original_width = 0;
  ImageGeometry geometry;            // original -> current pixels, all transforms composed
  // The canvas the loader pads this image to at least (0: the image's own size). Keep-aspect
  // resize sets it to the target size, so "resize 512 + pad" gives 512x512 whatever the aspect.
  int64_t canvas_height = 0, canvas_width = 0;
  int64_t dropped_boxes = 0;         // boxes removed by clipping/cropping so far (degenerate)

  int64_t height() const { return image.size(1); }
  int64_t width() const { return image.size(2); }
  int64_t num_boxes() const { return boxes.defined() ? boxes.size(0) : 0; }
};

// A padded batch of B examples. M = the largest box count in the batch (at least 1).
struct Batch {
  at::Tensor images;          // [B, 3, H, W] float32 normalized, zero padding bottom/right
  at::Tensor image_sizes;     // [B, 2] int64 (h, w): valid region after resize, before padding
  at::Tensor original_sizes;  // [B, 2] int64 (h, w) of the decoded image
  at::Tensor scales;          // [B] float32: current pixels per original pixel (geometry.scale())
  std::vector<ImageGeometry> geometries;  // full per-image maps (flip, crop offsets)
  at::Tensor boxes;           // [B, M, 4] float32 xyxy, rows >= num_boxes[b] are 0
  at::Tensor classes;         // [B, M] int64, padding = -1
  at::Tensor iscrowd;         // [B, M] bool, padding = false
  at::Tensor num_boxes;       // [B] int64 valid boxes per image
  at::Tensor masks;           // optional [B, M, H, W] uint8, zero padded
  at::Tensor label_maps;      // optional [B, H, W] int64, padding = 255 (ignore)
  std::vector<int64_t> image_ids;
  int64_t epoch = 0;          // epoch this batch belongs to (0-based)
  // Each example's position in its epoch's shard (the Loader's plan): a sharded evaluation tells
  // the wrap-around repeats by it, also when images were left out (bad_images: skip).
  std::vector<int64_t> positions;

  int64_t size() const { return static_cast<int64_t>(image_ids.size()); }
};

}  // namespace detseg
