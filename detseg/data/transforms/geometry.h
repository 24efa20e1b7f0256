// Implements: the primitive geometric transforms on an Example. Each one changes the image, boxes,
// instance masks and label map together, composes its map into Example::geometry and returns it.
// Boxes that become degenerate (zero width or height after clipping) are dropped and counted in
// Example::dropped_boxes. The random augmentations (augment.h) are built from these.
#pragma once

#include <array>
#include <cstdint>

#include "detseg/data/example.h"

namespace detseg {

// Resizes to exactly out_h x out_w: image bilinear, masks and label map nearest. Resets the canvas.
ImageGeometry transform_resize(Example& ex, int64_t out_h, int64_t out_w);

// Keeps the window [y0, y0+h) x [x0, x0+w), which must lie inside the image. Boxes are shifted,
// clipped to the window, and dropped when degenerate. Resets the canvas.
ImageGeometry transform_crop(Example& ex, int64_t y0, int64_t x0, int64_t h, int64_t w);

// Pads bottom/right to out_h x out_w (each >= the current size): image with `fill` (RGB),
// masks with 0, label map with `label_fill`. Boxes are unchanged.
ImageGeometry transform_pad(Example& ex, int64_t out_h, int64_t out_w, std::array<uint8_t, 3> fill,
                            uint8_t label_fill = 255);

// Mirrors left-right: x -> W - x for boxes (so [x1, x2] -> [W - x2, W - x1]).
ImageGeometry transform_hflip(Example& ex);

// Mirrors top-bottom: y -> H - y.
ImageGeometry transform_vflip(Example& ex);

// Rotates 90 degrees counter-clockwise (tf.image.rot90): pixel (x, y) -> (y, W - 1 - x), box
// [x1, y1, x2, y2] -> [y1, W - x2, y2, W - x1], size H x W -> W x H. A per-axis ImageGeometry
// cannot say this, so the geometry is left as it was (training only: nothing maps predictions back
// through it). Resets the canvas.
void transform_rot90(Example& ex);

// Moves the content through the affine map x' = a x + b y + tx, y' = c x + d y + ty (`map` =
// {a, b, tx, c, d, ty}, continuous coordinates: pixel i spans [i, i+1)), size kept: each pixel takes
// the nearest source pixel, or `fill` (image), 0 (masks), `label_fill` (label map) where that lies
// outside. A box becomes the extent of its four mapped corners, clipped; degenerate boxes are dropped
// and counted. Rotations and shears are no per-axis ImageGeometry: as transform_rot90, the geometry
// is left as it was (training only).
void transform_affine(Example& ex, const std::array<double, 6>& map, std::array<uint8_t, 3> fill,
                      uint8_t label_fill = 255);

// Places the image at (top, left) of an out_h x out_w canvas: image padded with `fill` (RGB), masks
// with 0, label map with `label_fill`; boxes shift by (left, top). Resets the canvas.
ImageGeometry transform_pad_at(Example& ex, int64_t top, int64_t left, int64_t out_h, int64_t out_w,
                               std::array<uint8_t, 3> fill, uint8_t label_fill = 255);

// Crops the window [y0, y0+h) x [x0, x0+w) (inside the image) as the reference's crops do: a box is
// kept when the fraction of its area inside the window is at least `overlap_thresh` (and it
// overlaps the window at all); a kept box cut by the window is clipped to it, or dropped when
// `clip_cut` is false. Removed boxes are counted in dropped_boxes. Resets the canvas.
ImageGeometry transform_crop_keep_overlap(Example& ex, int64_t y0, int64_t x0, int64_t h, int64_t w,
                                         double overlap_thresh, bool clip_cut);

// Clips boxes to the image and drops degenerate ones (counted). Returns how many were dropped.
int64_t clip_and_drop_boxes(Example& ex);

// Keeps the boxes (and their classes, crowd flags, masks) where keep[i] is true: keep is [N] bool.
void select_boxes(Example& ex, const at::Tensor& keep);

}  // namespace detseg
