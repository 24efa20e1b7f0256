// Implements: the image-mixing steps' compositing, given their random choices: mosaic (four
// images), mixup (two blended) and copy-paste (instances of one pasted onto another). steps.cpp
// draws the other images and the parameters; these functions are deterministic.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "detseg/data/example.h"

namespace detseg {

// Grey of the canvas around placed images (Ultralytics' 114).
constexpr uint8_t kMixFill = 114;

// Resizes `ex` by the largest scale that fits it in out_h x out_w (aspect kept; no padding).
void fit_within(Example& ex, int64_t out_h, int64_t out_w);

// Ultralytics' mosaic on a 2s x 2s canvas: four[0] top-left of the centre (xc, yc), four[1]
// top-right, four[2] bottom-left, four[3] bottom-right, each touching the centre; the output is the
// canvas's window [s/2, s/2 + s) in both axes (s x s), grey where no image lands, label maps the
// ignore label there. Each image is cropped to what is visible first (its boxes follow
// transform_crop_keep_overlap with threshold 0 and `clip_cut`). Returns four[0]'s example (id,
// geometry) with the composite.
Example mosaic_examples(std::vector<Example> four, int64_t s, int64_t xc, int64_t yc, bool clip_cut = true);

// r x ex + (1 - r) x other per pixel (rounded), boxes, classes, crowd flags and masks of both.
// `other` must have ex's size and the same optional fields. ex's label map is kept.
void mixup_examples(Example& ex, const Example& other, double r);

// Pastes other's instances where `selected` ([N_other] bool) is true onto ex (same size, both with
// masks): their pixels replace ex's under their masks; ex's masks lose the covered pixels, a mask
// that changed gets the box of its remaining pixels, and an instance covered entirely is dropped
// (counted in dropped_boxes). The pasted instances come after ex's.
void copy_paste_examples(Example& ex, const Example& other, const at::Tensor& selected);

}  // namespace detseg
