// Implements: running train_input.augment's steps (config/augment_steps.h) on an Example: each
// step's gate, its random draws from the example's own stream, and the primitives of geometry.h,
// colour.h and mix.h. The draws that pick a step's parameters are documented beside each step in
// steps.cpp; the helpers with non-trivial sampling are exposed here for tests.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "detseg/data/transforms/augment.h"

namespace detseg {

// Runs options.steps[begin, end) on `ex` in order: a step whose probability is below 1 runs when
// U(0, 1) < probability (one draw), as the older random_hflip did.
void run_augment_steps(Example& ex, const AugmentOptions& options, size_t begin, size_t end, Rng& rng,
                       const AugmentContext& context);

struct CropWindow {
  int64_t y0 = 0, x0 = 0, h = 0, w = 0;
};

// tf.image.sample_distorted_bounding_box over an h x w image: up to `max_attempts` windows with
// aspect ratio (width / height) ~ U(aspect_ratio_range) and area in area_range x h x w, the first
// that covers at least `min_object_covered` of one of `boxes` ([N, 4] xyxy pixels; none: the whole
// image counts as the box); the whole image when no attempt succeeds.
CropWindow sample_distorted_bounding_box(int64_t h, int64_t w, const at::Tensor& boxes, double min_object_covered,
                                         std::array<double, 2> aspect_ratio_range, std::array<double, 2> area_range,
                                         Rng& rng, int max_attempts = 100);

// random_jitter_boxes: each box side moves by (a draw) x the box's height or width; positive
// draws move a side outwards. `mode` as the step's jitter_mode. Clipped to the image, degenerate
// boxes dropped (counted).
void jitter_boxes(Example& ex, double ratio, const std::string& mode, Rng& rng);

// A Beta(a, b) draw (ratio of two gamma draws).
double sample_beta(double a, double b, Rng& rng);

}  // namespace detseg
