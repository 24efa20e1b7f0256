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

// Clips boxes to the image and drops degenerate ones (counted). Returns how many were dropped.
int64_t clip_and_drop_boxes(Example& ex);

// Keeps the boxes (and their classes, crowd flags, masks) where keep[i] is true: keep is [N] bool.
void select_boxes(Example& ex, const at::Tensor& keep);

}  // namespace detseg
