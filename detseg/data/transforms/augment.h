// Implements: the resize policies and random augmentations used by the input pipelines, built from
// the primitives in geometry.h, plus one options struct that chains them for a loader.
//   keep-aspect:   scale so the image fits out_h x out_w, canvas padded bottom/right (EfficientDet eval)
//   fixed:         resize to exactly out_h x out_w (aspect not kept)
//   scale-jitter:  EfficientDet training: target = output * U(min, max), fit, random crop to output
//   deeplab:       DeepLab training: scale by one of {min, min+step, ..., max}, pad to the crop size
//                  (image with the mean colour, labels with ignore), random crop
#pragma once

#include <array>
#include <cstdint>
#include <random>

#include "detseg/data/example.h"

namespace detseg {

using Rng = std::mt19937_64;

ImageGeometry resize_keep_aspect(Example& ex, int64_t out_h, int64_t out_w);
ImageGeometry resize_fixed(Example& ex, int64_t out_h, int64_t out_w);
// Flips with probability p; returns whether it flipped.
bool random_hflip(Example& ex, Rng& rng, double p = 0.5);

struct ScaleJitterOptions {
  double min_scale = 0.1, max_scale = 2.0;  // EfficientDet's jitter range
};
ImageGeometry random_scale_jitter_crop(Example& ex, int64_t out_h, int64_t out_w, const ScaleJitterOptions& options,
                                       Rng& rng);

struct DeepLabCropOptions {
  double min_scale = 0.5, max_scale = 2.0, scale_step = 0.25;  // step <= 0: continuous U(min, max)
  std::array<uint8_t, 3> image_fill = {124, 116, 104};  // ImageNet mean: 0 after normalisation
  uint8_t ignore_label = 255;
};
ImageGeometry random_scale_crop_pad(Example& ex, int64_t crop_h, int64_t crop_w, const DeepLabCropOptions& options,
                                    Rng& rng);

// One input pipeline: optional random flip, then one resize policy.
struct AugmentOptions {
  enum class Resize { kNone, kKeepAspect, kFixed, kScaleJitter, kDeepLab } resize = Resize::kKeepAspect;
  int64_t out_h = 512, out_w = 512;     // output (or crop) size
  bool random_flip = false;
  double flip_probability = 0.5;
  ScaleJitterOptions jitter;            // for kScaleJitter
  DeepLabCropOptions deeplab;           // for kDeepLab
};

// Applies `options` to `ex` (in place). Deterministic given the rng state.
void augment(Example& ex, const AugmentOptions& options, Rng& rng);

}  // namespace detseg
