// Implements: the resize policies and random augmentations used by the input pipelines, built from
// the primitives in geometry.h, plus one options struct that chains them for a loader.
//   keep-aspect:   scale so the image fits out_h x out_w, canvas padded bottom/right (EfficientDet eval)
//   fixed:         resize to exactly out_h x out_w (aspect not kept)
//   min-max:       the reference's keep_aspect_ratio_resizer: shorter side to min_dimension unless the
//                  longer side would pass max_dimension; no canvas (collate pads the batch)
//   scale-jitter:  EfficientDet training: target = output * U(min, max), fit, random crop to output
//   deeplab:       DeepLab training: scale by one of {min, min+step, ..., max}, pad to the crop size
//                  (image with the mean colour, labels with ignore), random crop
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "detseg/config/augment_steps.h"
#include "detseg/data/example.h"

namespace detseg {

using Rng = std::mt19937_64;

ImageGeometry resize_keep_aspect(Example& ex, int64_t out_h, int64_t out_w);
ImageGeometry resize_fixed(Example& ex, int64_t out_h, int64_t out_w);
// Shorter side to min_dimension, or longer side to max_dimension where that is the smaller scale.
ImageGeometry resize_min_max(Example& ex, double min_dimension, double max_dimension);
// Flips with probability p; returns whether it flipped.
bool random_hflip(Example& ex, Rng& rng, double p = 0.5);

struct ScaleJitterOptions {
  double min_scale = 0.1, max_scale = 2.0;  // EfficientDet's jitter range
};
ImageGeometry random_scale_jitter_crop(Example& ex, int64_t out_h, int64_t out_w, const ScaleJitterOptions& options,
                                       Rng& rng);

struct MinMaxOptions {
  double min_dimension = 600, max_dimension = 1024;  // the reference's keep_aspect_ratio_resizer defaults
  // Training: both dimensions times U(min_scale, max_scale) (multi-scale training; 1, 1: off).
  double min_scale = 1.0, max_scale = 1.0;
};
ImageGeometry random_resize_min_max(Example& ex, const MinMaxOptions& options, Rng& rng);

struct DeepLabCropOptions {
  double min_scale = 0.5, max_scale = 2.0, scale_step = 0.25;  // step <= 0: continuous U(min, max)
  std::array<uint8_t, 3> image_fill = {124, 116, 104};  // ImageNet mean: 0 after normalisation
  uint8_t ignore_label = 255;
};
ImageGeometry random_scale_crop_pad(Example& ex, int64_t crop_h, int64_t crop_w, const DeepLabCropOptions& options,
                                    Rng& rng);

// One input pipeline: optional random flip, the configured steps (train_input.augment, run by
// steps.h), then one resize policy.
struct AugmentOptions {
  enum class Resize { kNone, kKeepAspect, kFixed, kScaleJitter, kDeepLab, kMinMax } resize = Resize::kKeepAspect;
  int64_t out_h = 512, out_w = 512;     // output (or crop) size
  bool random_flip = false;
  double flip_probability = 0.5;
  ScaleJitterOptions jitter;            // for kScaleJitter
  DeepLabCropOptions deeplab;           // for kDeepLab
  MinMaxOptions min_max;                // for kMinMax
  // Steps with their sizes resolved (no 0 = "the model's" left; engine/inputs.cpp does that).
  std::vector<AugmentStep> steps;
  int64_t total_steps = 0;     // training length, for mosaic's off_last_steps (0: unknown)
  bool drop_cut_boxes = false; // train_input.box_policy drop: a box a crop cuts is dropped, not clipped
};

// What a step may need beyond its example: the training step the example is for, and other
// examples to mix in (mosaic, mixup, copy_paste).
struct AugmentContext {
  int64_t step = -1;  // the batch number (= training step); -1: unknown
  // Loads an un-augmented example of the data set picked with `rng` (never an absent one). Empty:
  // mixing steps fail with an error naming the step.
  std::function<Example(Rng&)> draw_example;
};

// Applies `options` to `ex` (in place). Deterministic given the rng state.
void augment(Example& ex, const AugmentOptions& options, Rng& rng);
void augment(Example& ex, const AugmentOptions& options, Rng& rng, const AugmentContext& context);

}  // namespace detseg
