// Implements: the augmentation steps of train_input.augment: their random draws (from the example's
// own stream, in the order written beside each) and the primitives that carry them out.
#include "detseg/data/transforms/steps.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "detseg/core/error.h"
#include "detseg/data/transforms/autoaugment.h"
#include "detseg/data/transforms/colour.h"
#include "detseg/data/transforms/geometry.h"
#include "detseg/data/transforms/mix.h"

namespace detseg {

namespace {

double uniform(Rng& rng, double lo, double hi) {
  return lo == hi ? lo : std::uniform_real_distribution<double>(lo, hi)(rng);
}
// An integer in [lo, hi) (TF's random_uniform with an integer maxval); lo when hi <= lo.
int64_t uniform_int(Rng& rng, int64_t lo, int64_t hi) {
  return hi <= lo + 1 ? lo : std::uniform_int_distribution<int64_t>(lo, hi - 1)(rng);
}

// What a step sees besides its parameters.
struct StepEnv {
  const AugmentOptions& options;
  size_t index;  // its place in options.steps
  const AugmentContext& context;
};

using StepFn = void (*)(Example&, const AugmentStep&, Rng&, const StepEnv&);

// Colour steps write the image in place: make sure it is this example's own contiguous tensor
// (a copy of an Example shares its tensor, a view its storage; a freshly decoded image is not copied).
at::Tensor& own_image(Example& ex) {
  if (!ex.image.is_contiguous() || ex.image.use_count() > 1 || ex.image.storage().use_count() > 1)
    ex.image = ex.image.clone();
  return ex.image;
}

// Another example of the data set for a mixing step, through the steps listed before it (drawn from
// a stream of its own, seeded by this example's).
Example other_example(const AugmentStep& step, Rng& rng, const StepEnv& env) {
  DETSEG_CHECK(static_cast<bool>(env.context.draw_example), step.where, step.name,
               ": mixing images needs the training data set (it runs in the training loader only)");
  Example other = env.context.draw_example(rng);
  Rng own(rng());
  run_augment_steps(other, env.options, 0, env.index, own, env.context);
  return other;
}

// The image's mean colour (0-255 per channel), the reference's default pad colour.
std::array<uint8_t, 3> mean_colour(const Example& ex) {
  const at::Tensor mean = ex.image.to(at::kFloat).mean({1, 2}).round();
  return {static_cast<uint8_t>(mean[0].item<float>()), static_cast<uint8_t>(mean[1].item<float>()),
          static_cast<uint8_t>(mean[2].item<float>())};
}

std::array<uint8_t, 3> pad_colour(const AugmentStep& s, const Example& ex) {
  const std::vector<double>& c = s.numbers("pad_color");
  if (c.size() != 3) return mean_colour(ex);
  return {static_cast<uint8_t>(std::lround(c[0])), static_cast<uint8_t>(std::lround(c[1])),
          static_cast<uint8_t>(std::lround(c[2]))};
}

std::array<double, 2> pair_of(const AugmentStep& s, const char* key) {
  const std::vector<double>& v = s.numbers(key);
  return {v.at(0), v.at(1)};
}

// random_crop_image's work. Draws: U(0, 1) for random_coef (only when > 0), then the window's.
// Returns whether it cropped.
bool random_crop(Example& ex, double min_object_covered, std::array<double, 2> aspect, std::array<double, 2> area,
                 double overlap_thresh, bool clip_boxes, double random_coef, Rng& rng, const StepEnv& env) {
  if (random_coef > 0 && uniform(rng, 0, 1) <= random_coef) return false;
  const CropWindow w = sample_distorted_bounding_box(ex.height(), ex.width(), ex.boxes, min_object_covered, aspect,
                                                     area, rng);
  transform_crop_keep_overlap(ex, w.y0, w.x0, w.h, w.w, overlap_thresh, clip_boxes && !env.options.drop_cut_boxes);
  return true;
}

// random_pad_image's work for given bounds (0: the reference's defaults). Draws: the height in
// [min, max), the width, then the offsets.
void random_pad(Example& ex, int64_t min_h, int64_t min_w, int64_t max_h, int64_t max_w, std::array<uint8_t, 3> fill,
                Rng& rng) {
  const int64_t h = ex.height(), w = ex.width();
  if (max_h <= 0) max_h = 2 * h;
  if (max_w <= 0) max_w = 2 * w;
  max_h = std::max(max_h, h), max_w = std::max(max_w, w);
  min_h = std::max(min_h, h), min_w = std::max(min_w, w);
  const int64_t th = max_h > min_h ? uniform_int(rng, min_h, max_h) : max_h;
  const int64_t tw = max_w > min_w ? uniform_int(rng, min_w, max_w) : max_w;
  const int64_t oy = th > h ? uniform_int(rng, 0, th - h) : 0;
  const int64_t ox = tw > w ? uniform_int(rng, 0, tw - w) : 0;
  transform_pad_at(ex, oy, ox, th, tw, fill, 255);
}

void step_hflip(Example& ex, const AugmentStep&, Rng&, const StepEnv&) { transform_hflip(ex); }
void step_vflip(Example& ex, const AugmentStep&, Rng&, const StepEnv&) { transform_vflip(ex); }
void step_rot90(Example& ex, const AugmentStep&, Rng&, const StepEnv&) { transform_rot90(ex); }

// Draw: s ~ U(min_scale_ratio, max_scale_ratio).
void step_image_scale(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv&) {
  const double k = uniform(rng, s.number("min_scale_ratio"), s.number("max_scale_ratio"));
  const int64_t h = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(ex.height()) * k));
  const int64_t w = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(ex.width()) * k));
  transform_resize(ex, h, w);
}

void step_jitter_boxes(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv&) {
  jitter_boxes(ex, s.number("ratio"), s.text("jitter_mode"), rng);
}

// Draw: delta ~ U(-max_delta, max_delta).
void step_brightness(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv&) {
  adjust_brightness(own_image(ex), uniform(rng, -s.number("max_delta"), s.number("max_delta")));
}
// Draw: factor ~ U(min_delta, max_delta).
void step_contrast(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv&) {
  adjust_contrast(own_image(ex), uniform(rng, s.number("min_delta"), s.number("max_delta")));
}
void step_hue(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv&) {
  adjust_hue(own_image(ex), uniform(rng, -s.number("max_delta"), s.number("max_delta")));
}
void step_saturation(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv&) {
  adjust_saturation(own_image(ex), uniform(rng, s.number("min_delta"), s.number("max_delta")));
}

// The reference's random_distort_color: four draws, in the order of the changes.
void step_distort_color(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv&) {
  at::Tensor& image = own_image(ex);
  adjust_brightness(image, uniform(rng, -32.0 / 255.0, 32.0 / 255.0));
  if (s.integer("color_ordering") == 0) {
    adjust_saturation(image, uniform(rng, 0.5, 1.5));
    adjust_hue(image, uniform(rng, -0.2, 0.2));
    adjust_contrast(image, uniform(rng, 0.5, 1.5));
  } else {
    adjust_contrast(image, uniform(rng, 0.5, 1.5));
    adjust_saturation(image, uniform(rng, 0.5, 1.5));
    adjust_hue(image, uniform(rng, -0.2, 0.2));
  }
}

void step_gray(Example& ex, const AugmentStep&, Rng&, const StepEnv&) { rgb_to_gray(own_image(ex)); }

void step_pixel_value_scale(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv&) {
  scale_pixel_values(own_image(ex), s.number("minval"), s.number("maxval"), rng);
}

// Per try: U(0, 1) against `probability`, then (patch) y and x fractions ~ U(0, 1 - ratio).
void step_black_patches(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv&) {
  at::Tensor& image = own_image(ex);
  const double ratio = s.number("size_to_image_ratio");
  const int64_t size = static_cast<int64_t>(static_cast<double>(std::min(ex.height(), ex.width())) * ratio);
  for (int64_t i = 0; i < s.integer("max_black_patches"); ++i) {
    if (uniform(rng, 0, 1) > s.number("probability")) continue;
    const double fy = uniform(rng, 0, 1 - ratio), fx = uniform(rng, 0, 1 - ratio);
    black_patch(image, static_cast<int64_t>(fy * static_cast<double>(ex.height())),
                static_cast<int64_t>(fx * static_cast<double>(ex.width())), size);
  }
}

// Draws: U(0, 1) for random_coef (when > 0), then the quality.
void step_jpeg_quality(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv&) {
  const double coef = s.number("random_coef");
  if (coef > 0 && uniform(rng, 0, 1) <= coef) return;
  const int64_t q = uniform_int(rng, s.integer("min_jpeg_quality"), s.integer("max_jpeg_quality"));
  jpeg_round_trip(own_image(ex), static_cast<int>(q));
}

// Draws: random_coef's (when > 0), centre y, centre x, patch size, sigma, then the noise.
void step_patch_gaussian(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv&) {
  const double coef = s.number("random_coef");
  if (coef > 0 && uniform(rng, 0, 1) <= coef) return;
  const int64_t cy = uniform_int(rng, 0, ex.height()), cx = uniform_int(rng, 0, ex.width());
  const int64_t size = uniform_int(rng, s.integer("min_patch_size"), s.integer("max_patch_size"));
  const double sigma = uniform(rng, s.number("min_gaussian_stddev"), s.number("max_gaussian_stddev"));
  add_patch_gaussian(own_image(ex), cy, cx, size, sigma, rng);
}

void step_crop_image(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv& env) {
  random_crop(ex, s.number("min_object_covered"), pair_of(s, "aspect_ratio_range"), pair_of(s, "area_range"),
              s.number("overlap_thresh"), s.flag("clip_boxes"), s.number("random_coef"), rng, env);
}

void step_pad_image(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv&) {
  random_pad(ex, s.integer("min_image_height"), s.integer("min_image_width"), s.integer("max_image_height"),
             s.integer("max_image_width"), pad_colour(s, ex), rng);
}

// The padded size bounds are ratios of the size before the crop (the reference's point of the step).
void step_crop_pad_image(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv& env) {
  const double h = static_cast<double>(ex.height()), w = static_cast<double>(ex.width());
  random_crop(ex, s.number("min_object_covered"), pair_of(s, "aspect_ratio_range"), pair_of(s, "area_range"),
              s.number("overlap_thresh"), s.flag("clip_boxes"), s.number("random_coef"), rng, env);
  const auto lo = pair_of(s, "min_padded_size_ratio"), hi = pair_of(s, "max_padded_size_ratio");
  random_pad(ex, static_cast<int64_t>(h * lo[0]), static_cast<int64_t>(w * lo[1]), static_cast<int64_t>(h * hi[0]),
             static_cast<int64_t>(w * hi[1]), pad_colour(s, ex), rng);
}

// Draw: the operation (uniform), then random_crop_image's draws with its values.
void step_ssd_crop(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv& env) {
  const std::vector<double>& covered = s.numbers("min_object_covered");
  const size_t op = static_cast<size_t>(uniform_int(rng, 0, static_cast<int64_t>(covered.size())));
  random_crop(ex, covered[op], pair_of(s, "aspect_ratio_range"), pair_of(s, "area_range"),
              s.numbers("overlap_thresh")[op], s.flag("clip_boxes"), s.number("random_coef"), rng, env);
}

// Draws: the scale, then U(0, 1) for the y and the x offset (the reference's order).
void step_scale_crop_pad_square(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv& env) {
  const int64_t out = s.integer("output_size");
  DETSEG_CHECK(out > 0, "random_scale_crop_and_pad_to_square: output_size must be resolved (> 0)");
  const double scale = uniform(rng, s.number("scale_min"), s.number("scale_max"));
  const double h = static_cast<double>(ex.height()), w = static_cast<double>(ex.width()), longer = std::max(h, w);
  const int64_t sh = std::max<int64_t>(1, static_cast<int64_t>(scale * static_cast<double>(out) * h / longer));
  const int64_t sw = std::max<int64_t>(1, static_cast<int64_t>(scale * static_cast<double>(out) * w / longer));
  const int64_t oy = static_cast<int64_t>(static_cast<double>(std::max<int64_t>(0, sh - out)) * uniform(rng, 0, 1));
  const int64_t ox = static_cast<int64_t>(static_cast<double>(std::max<int64_t>(0, sw - out)) * uniform(rng, 0, 1));
  transform_resize(ex, sh, sw);
  transform_crop_keep_overlap(ex, oy, ox, std::min(out, sh - oy), std::min(out, sw - ox), 0.0,
                              !env.options.drop_cut_boxes);
  ex.canvas_height = ex.canvas_width = out;  // the collate pads to the square
}

void step_resize_to_fit(Example& ex, const AugmentStep& s, Rng&, const StepEnv&) {
  resize_keep_aspect(ex, s.integer("size"), s.integer("size"));
}

void step_resize_min_max(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv&) {
  MinMaxOptions m;
  m.min_dimension = s.number("min_dimension");
  m.max_dimension = s.number("max_dimension");
  m.min_scale = s.number("scale_min");
  m.max_scale = s.number("scale_max");
  random_resize_min_max(ex, m, rng);
}

void step_scale_jitter_crop(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv&) {
  ScaleJitterOptions j;
  j.min_scale = s.number("scale_min");
  j.max_scale = s.number("scale_max");
  random_scale_jitter_crop(ex, s.integer("output_size"), s.integer("output_size"), j, rng);
}

void step_deeplab(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv& env) {
  DeepLabCropOptions d = env.options.deeplab;
  d.min_scale = s.number("scale_min");
  d.max_scale = s.number("scale_max");
  d.scale_step = s.number("scale_step");
  random_scale_crop_pad(ex, s.integer("crop_size"), s.integer("crop_size"), d, rng);
}

// Draws: the centre x, y in [s/2, 3s/2), then the three other examples.
void step_mosaic(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv& env) {
  const int64_t off = s.integer("off_last_steps");
  if (off > 0 && env.context.step >= 0 && env.options.total_steps > 0 && env.context.step >= env.options.total_steps - off)
    return;
  const int64_t size = s.integer("output_size");
  DETSEG_CHECK(size > 0, "mosaic: output_size must be resolved (> 0)");
  const int64_t xc = uniform_int(rng, size / 2, size + size / 2), yc = uniform_int(rng, size / 2, size + size / 2);
  std::vector<Example> four;
  four.push_back(std::move(ex));
  for (int k = 0; k < 3; ++k) four.push_back(other_example(s, rng, env));
  for (Example& e : four) fit_within(e, size, size);
  ex = mosaic_examples(std::move(four), size, xc, yc, !env.options.drop_cut_boxes);
}

// Draws: the other example, then r ~ Beta(alpha, alpha).
void step_mixup(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv& env) {
  Example other = other_example(s, rng, env);
  fit_within(other, ex.height(), ex.width());
  transform_pad_at(other, 0, 0, ex.height(), ex.width(), {kMixFill, kMixFill, kMixFill}, 255);
  const double r = sample_beta(s.number("alpha"), s.number("alpha"), rng);
  mixup_examples(ex, other, r);
}

// Draws: the other example, one U(0, 1) per instance of it, and (when none was picked) one index.
void step_copy_paste(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv& env) {
  Example other = other_example(s, rng, env);
  fit_within(other, ex.height(), ex.width());
  transform_pad_at(other, 0, 0, ex.height(), ex.width(), {kMixFill, kMixFill, kMixFill}, 255);
  const int64_t n = other.num_boxes();
  if (n == 0 || !other.masks.defined()) return;
  at::Tensor selected = at::zeros({n}, at::kBool);
  bool any = false;
  for (int64_t i = 0; i < n; ++i)
    if (uniform(rng, 0, 1) < s.number("instance_probability")) selected[i] = true, any = true;
  if (!any) selected[uniform_int(rng, 0, n)] = true;
  copy_paste_examples(ex, other, selected);
}

// Draws: autoaugment_image's (autoaugment.h).
void step_autoaugment(Example& ex, const AugmentStep& s, Rng& rng, const StepEnv&) {
  own_image(ex);
  autoaugment_image(ex, s.text("policy_name"), rng);
}

const std::unordered_map<std::string, StepFn>& step_table() {
  static const std::unordered_map<std::string, StepFn> table = {
      {"random_horizontal_flip", step_hflip},
      {"random_vertical_flip", step_vflip},
      {"random_rotation90", step_rot90},
      {"random_image_scale", step_image_scale},
      {"random_jitter_boxes", step_jitter_boxes},
      {"random_adjust_brightness", step_brightness},
      {"random_adjust_contrast", step_contrast},
      {"random_adjust_hue", step_hue},
      {"random_adjust_saturation", step_saturation},
      {"random_distort_color", step_distort_color},
      {"random_rgb_to_gray", step_gray},
      {"random_pixel_value_scale", step_pixel_value_scale},
      {"random_black_patches", step_black_patches},
      {"random_jpeg_quality", step_jpeg_quality},
      {"random_patch_gaussian", step_patch_gaussian},
      {"autoaugment_image", step_autoaugment},
      {"random_crop_image", step_crop_image},
      {"random_pad_image", step_pad_image},
      {"random_crop_pad_image", step_crop_pad_image},
      {"ssd_random_crop", step_ssd_crop},
      {"random_scale_crop_and_pad_to_square", step_scale_crop_pad_square},
      {"resize_to_fit", step_resize_to_fit},
      {"resize_min_max", step_resize_min_max},
      {"scale_jitter_crop", step_scale_jitter_crop},
      {"deeplab_scale_crop_pad", step_deeplab},
      {"mosaic", step_mosaic},
      {"mixup", step_mixup},
      {"copy_paste", step_copy_paste},
  };
  return table;
}

}  // namespace

void run_augment_steps(Example& ex, const AugmentOptions& options, size_t begin, size_t end, Rng& rng,
                       const AugmentContext& context) {
  const auto& table = step_table();
  for (size_t i = begin; i < end && i < options.steps.size(); ++i) {
    const AugmentStep& step = options.steps[i];
    if (step.probability < 1 && uniform(rng, 0, 1) >= step.probability) continue;
    auto it = table.find(step.name);
    DETSEG_CHECK(it != table.end(), "augmentation step ", step.name, " has no implementation");
    it->second(ex, step, rng, StepEnv{options, i, context});
  }
}

CropWindow sample_distorted_bounding_box(int64_t h, int64_t w, const at::Tensor& boxes, double min_object_covered,
                                         std::array<double, 2> aspect_ratio_range, std::array<double, 2> area_range,
                                         Rng& rng, int max_attempts) {
  // The boxes to cover, as float rectangles; none: the whole image (use_image_if_no_bounding_boxes).
  std::vector<std::array<double, 4>> rects;
  if (boxes.defined() && boxes.size(0) > 0) {
    const at::Tensor b = boxes.to(at::kDouble).contiguous();
    const double* p = b.data_ptr<double>();
    for (int64_t i = 0; i < b.size(0); ++i) rects.push_back({p[4 * i], p[4 * i + 1], p[4 * i + 2], p[4 * i + 3]});
  } else {
    rects.push_back({0, 0, static_cast<double>(w), static_cast<double>(h)});
  }
  const double image_area = static_cast<double>(h) * static_cast<double>(w);
  const double min_area = area_range[0] * image_area, max_area = area_range[1] * image_area;
  for (int attempt = 0; attempt < max_attempts; ++attempt) {
    const double aspect = uniform(rng, aspect_ratio_range[0], aspect_ratio_range[1]);
    // TF's GenerateRandomCrop: a height between the areas' bounds, then the width from the aspect.
    int64_t height = std::lround(std::sqrt(min_area / aspect));
    int64_t max_height = std::lround(std::sqrt(max_area / aspect));
    if (std::lround(static_cast<double>(max_height) * aspect) > w) {
      max_height = static_cast<int64_t>((static_cast<double>(w) + 0.5 - 1e-7) / aspect);
      if (std::lround(static_cast<double>(max_height) * aspect) > w) max_height -= 1;
    }
    max_height = std::min(max_height, h);
    height = std::min(height, max_height);
    if (height < max_height) height += uniform_int(rng, 0, max_height - height + 1);
    int64_t width = std::lround(static_cast<double>(height) * aspect);
    double area = static_cast<double>(width * height);
    if (area < min_area) {
      height += 1;
      width = std::lround(static_cast<double>(height) * aspect);
      area = static_cast<double>(width * height);
    }
    if (area < min_area || area > max_area || width <= 0 || width > w || height <= 0 || height > h) continue;
    // TF's Uniform(n) is [0, n): the last offset is never drawn.
    const int64_t y = height < h ? uniform_int(rng, 0, h - height) : 0;
    const int64_t x = width < w ? uniform_int(rng, 0, w - width) : 0;
    bool covers = false;
    for (const auto& r : rects) {
      const double box_area = (r[2] - r[0]) * (r[3] - r[1]);
      if (box_area <= 0) continue;
      const double iw = std::min(r[2], static_cast<double>(x + width)) - std::max(r[0], static_cast<double>(x));
      const double ih = std::min(r[3], static_cast<double>(y + height)) - std::max(r[1], static_cast<double>(y));
      if (iw > 0 && ih > 0 && iw * ih / box_area >= min_object_covered) covers = true;
      if (covers) break;
    }
    if (covers) return CropWindow{y, x, height, width};
  }
  return CropWindow{0, 0, h, w};
}

void jitter_boxes(Example& ex, double ratio, const std::string& mode, Rng& rng) {
  const int64_t n = ex.num_boxes();
  if (n == 0) return;
  double lo = -ratio, hi = ratio;
  if (mode == "expand" || mode == "expand_symmetric") lo = 0;
  if (mode == "shrink" || mode == "shrink_symmetric") lo = -ratio, hi = 0;
  const bool symmetric = mode == "expand_symmetric" || mode == "shrink_symmetric";
  at::Tensor b = ex.boxes.to(at::kFloat).contiguous().clone();
  float* p = b.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    const double bw = std::max(1e-6, static_cast<double>(p[4 * i + 2] - p[4 * i]));
    const double bh = std::max(1e-6, static_cast<double>(p[4 * i + 3] - p[4 * i + 1]));
    // The reference's order: ymin, xmin, ymax, xmax; a positive draw moves a side outwards.
    double d[4];
    if (symmetric) {
      d[0] = d[1] = d[2] = d[3] = uniform(rng, lo, hi);
    } else {
      for (double& v : d) v = uniform(rng, lo, hi);
    }
    p[4 * i + 1] = static_cast<float>(p[4 * i + 1] - bh * d[0]);
    p[4 * i + 0] = static_cast<float>(p[4 * i + 0] - bw * d[1]);
    p[4 * i + 3] = static_cast<float>(p[4 * i + 3] + bh * d[2]);
    p[4 * i + 2] = static_cast<float>(p[4 * i + 2] + bw * d[3]);
  }
  ex.boxes = b;
  clip_and_drop_boxes(ex);
}

double sample_beta(double a, double b, Rng& rng) {
  const double x = std::gamma_distribution<double>(a, 1.0)(rng);
  const double y = std::gamma_distribution<double>(b, 1.0)(rng);
  return x + y > 0 ? x / (x + y) : 0.5;
}

}  // namespace detseg
