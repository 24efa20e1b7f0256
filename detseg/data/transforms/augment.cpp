// Implements: resize policies and random augmentations (EfficientDet scale jitter, DeepLab crop).
#include "detseg/data/transforms/augment.h"

#include <algorithm>
#include <cmath>

#include "detseg/core/error.h"
#include "detseg/data/transforms/geometry.h"
#include "detseg/data/transforms/steps.h"

namespace detseg {
namespace {

double uniform(Rng& rng, double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }

int64_t round_size(double v) { return std::max<int64_t>(1, static_cast<int64_t>(std::lround(v))); }

// Resizes by the largest scale that fits the image inside target_h x target_w.
ImageGeometry resize_to_fit(Example& ex, double target_h, double target_w) {
  const double scale = std::min(target_h / static_cast<double>(ex.height()), target_w / static_cast<double>(ex.width()));
  return transform_resize(ex, round_size(scale * static_cast<double>(ex.height())),
                          round_size(scale * static_cast<double>(ex.width())));
}

// Random top-left corner for an out_h x out_w window; the window is clamped to the image.
ImageGeometry random_crop(Example& ex, int64_t out_h, int64_t out_w, Rng& rng) {
  const int64_t h = std::min(out_h, ex.height()), w = std::min(out_w, ex.width());
  // TF style: offset = floor(U(0,1) * max_offset), so both ends of the range are reachable.
  const int64_t y0 = static_cast<int64_t>(std::floor(uniform(rng, 0, 1) * static_cast<double>(ex.height() - h + 1)));
  const int64_t x0 = static_cast<int64_t>(std::floor(uniform(rng, 0, 1) * static_cast<double>(ex.width() - w + 1)));
  return transform_crop(ex, std::min(y0, ex.height() - h), std::min(x0, ex.width() - w), h, w);
}

// The map g with before.then(g) == after: what one composite step did on its own.
ImageGeometry step_between(const ImageGeometry& before, const ImageGeometry& after) {
  ImageGeometry g;
  g.scale_x = after.scale_x / before.scale_x;
  g.scale_y = after.scale_y / before.scale_y;
  g.offset_x = after.offset_x - g.scale_x * before.offset_x;
  g.offset_y = after.offset_y - g.scale_y * before.offset_y;
  return g;
}

}  // namespace

ImageGeometry resize_keep_aspect(Example& ex, int64_t out_h, int64_t out_w) {
  DETSEG_CHECK(out_h > 0 && out_w > 0, "resize_keep_aspect: size must be positive, got ", out_h, "x", out_w);
  ImageGeometry g = resize_to_fit(ex, static_cast<double>(out_h), static_cast<double>(out_w));
  ex.canvas_height = out_h;
  ex.canvas_width = out_w;
  return g;
}

ImageGeometry resize_fixed(Example& ex, int64_t out_h, int64_t out_w) { return transform_resize(ex, out_h, out_w); }

ImageGeometry resize_min_max(Example& ex, double min_dimension, double max_dimension) {
  DETSEG_CHECK(min_dimension > 0 && max_dimension >= min_dimension,
               "resize_min_max: need 0 < min_dimension <= max_dimension, got ", min_dimension, ", ", max_dimension);
  const double h = static_cast<double>(ex.height()), w = static_cast<double>(ex.width());
  double scale = min_dimension / std::min(h, w);
  if (scale * std::max(h, w) > max_dimension) scale = max_dimension / std::max(h, w);
  // The collate pads each batch to its largest image: no fixed canvas.
  ex.canvas_height = 0;
  ex.canvas_width = 0;
  return transform_resize(ex, std::min(round_size(scale * h), static_cast<int64_t>(std::floor(max_dimension))),
                          std::min(round_size(scale * w), static_cast<int64_t>(std::floor(max_dimension))));
}

ImageGeometry random_resize_min_max(Example& ex, const MinMaxOptions& o, Rng& rng) {
  DETSEG_CHECK(o.min_scale > 0 && o.max_scale >= o.min_scale, "min-max resize: need 0 < min_scale <= max_scale, got ",
               o.min_scale, ", ", o.max_scale);
  const double s = o.min_scale == o.max_scale ? o.min_scale : uniform(rng, o.min_scale, o.max_scale);
  return resize_min_max(ex, s * o.min_dimension, s * o.max_dimension);
}

bool random_hflip(Example& ex, Rng& rng, double p) {
  if (uniform(rng, 0, 1) >= p) return false;
  transform_hflip(ex);
  return true;
}

ImageGeometry random_scale_jitter_crop(Example& ex, int64_t out_h, int64_t out_w, const ScaleJitterOptions& o,
                                       Rng& rng) {
  DETSEG_CHECK(o.min_scale > 0 && o.max_scale >= o.min_scale, "scale jitter: need 0 < min_scale <= max_scale, got ",
               o.min_scale, ", ", o.max_scale);
  const ImageGeometry before = ex.geometry;
  const double s = o.min_scale == o.max_scale ? o.min_scale : uniform(rng, o.min_scale, o.max_scale);
  resize_to_fit(ex, s * static_cast<double>(out_h), s * static_cast<double>(out_w));
  random_crop(ex, out_h, out_w, rng);
  ex.canvas_height = out_h;
  ex.canvas_width = out_w;
  return step_between(before, ex.geometry);
}

ImageGeometry random_scale_crop_pad(Example& ex, int64_t crop_h, int64_t crop_w, const DeepLabCropOptions& o,
                                    Rng& rng) {
  DETSEG_CHECK(o.min_scale > 0 && o.max_scale >= o.min_scale, "deeplab crop: need 0 < min_scale <= max_scale, got ",
               o.min_scale, ", ", o.max_scale);
  const ImageGeometry before = ex.geometry;
  double s = o.min_scale;
  if (o.scale_step > 0) {
    const int64_t steps = static_cast<int64_t>(std::floor((o.max_scale - o.min_scale) / o.scale_step + 1e-9));
    s += o.scale_step * static_cast<double>(std::uniform_int_distribution<int64_t>(0, steps)(rng));
  } else if (o.max_scale > o.min_scale) {
    s = uniform(rng, o.min_scale, o.max_scale);
  }
  transform_resize(ex, round_size(s * static_cast<double>(ex.height())), round_size(s * static_cast<double>(ex.width())));
  transform_pad(ex, std::max(ex.height(), crop_h), std::max(ex.width(), crop_w), o.image_fill, o.ignore_label);
  random_crop(ex, crop_h, crop_w, rng);
  return step_between(before, ex.geometry);
}

void augment(Example& ex, const AugmentOptions& o, Rng& rng) { augment(ex, o, rng, AugmentContext{}); }

void augment(Example& ex, const AugmentOptions& o, Rng& rng, const AugmentContext& context) {
  if (o.random_flip) random_hflip(ex, rng, o.flip_probability);
  run_augment_steps(ex, o, 0, o.steps.size(), rng, context);
  switch (o.resize) {
    case AugmentOptions::Resize::kNone:
      break;
    case AugmentOptions::Resize::kKeepAspect:
      resize_keep_aspect(ex, o.out_h, o.out_w);
      break;
    case AugmentOptions::Resize::kFixed:
      resize_fixed(ex, o.out_h, o.out_w);
      break;
    case AugmentOptions::Resize::kScaleJitter:
      random_scale_jitter_crop(ex, o.out_h, o.out_w, o.jitter, rng);
      break;
    case AugmentOptions::Resize::kDeepLab:
      random_scale_crop_pad(ex, o.out_h, o.out_w, o.deeplab, rng);
      break;
    case AugmentOptions::Resize::kMinMax:
      random_resize_min_max(ex, o.min_max, rng);
      break;
  }
}

}  // namespace detseg
