// Implements: AutoAugment for detection: the policies as tables, level -> argument, the pixel
// operations (PIL's formulas as the reference writes them in TF), the geometric ones through
// transform_affine, and the box-only ones on each box's pixels.
#include "detseg/data/transforms/autoaugment.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "detseg/core/error.h"
#include "detseg/data/transforms/colour.h"
#include "detseg/data/transforms/geometry.h"

namespace detseg {
namespace {

constexpr double kMaxLevel = 10.0;  // the reference's _MAX_LEVEL
constexpr uint8_t kGrey = 128;      // the reference's replace value for uncovered pixels
constexpr std::array<uint8_t, 3> kGreyFill = {kGrey, kGrey, kGrey};
constexpr uint8_t kIgnoreLabel = 255;
constexpr double kPi = 3.14159265358979323846;

double unit_draw(Rng& rng) { return std::uniform_real_distribution<double>(0.0, 1.0)(rng); }
// An integer in [lo, hi] (both included: TF's random_uniform over [lo, hi + 1)).
int64_t index_draw(Rng& rng, int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }

// ---- pixel operations on the example's own uint8 [3, H, W] image, in place.

using Lut = std::array<uint8_t, 256>;

void check_image(const at::Tensor& image) {
  DETSEG_CHECK(image.defined() && image.dim() == 3 && image.size(0) == 3 && image.scalar_type() == at::kByte &&
                   image.is_contiguous(),
               "autoaugment_image: expected a contiguous uint8 image [3, H, W]");
}

// Looks each channel's values up in its own table; `make_lut(channel values, count)` builds it.
template <class MakeLut>
void map_channels(at::Tensor& image, MakeLut make_lut) {
  check_image(image);
  const int64_t n = image.size(1) * image.size(2);
  for (int c = 0; c < 3; ++c) {
    uint8_t* p = image.data_ptr<uint8_t>() + c * n;
    const Lut lut = make_lut(static_cast<const uint8_t*>(p), n);
    for (int64_t i = 0; i < n; ++i) p[i] = lut[p[i]];
  }
}

template <class Fn>
void map_values(at::Tensor& image, Fn fn) {
  Lut lut;
  for (int x = 0; x < 256; ++x) lut[static_cast<size_t>(x)] = static_cast<uint8_t>(std::clamp(fn(x), 0, 255));
  map_channels(image, [&](const uint8_t*, int64_t) { return lut; });
}

void posterize(at::Tensor& image, double bits) {
  // TF's right_shift clamps the shift to 7 for uint8: 0 bits (level 0-2) keeps the top bit, not none.
  const int shift = std::min(7, 8 - static_cast<int>(bits));
  map_values(image, [shift](int x) { return (x >> shift) << shift; });
}

void solarize(at::Tensor& image, double threshold) {
  map_values(image, [threshold](int x) { return x < threshold ? x : 255 - x; });
}

void solarize_add(at::Tensor& image, double addition) {
  map_values(image, [addition](int x) { return x < 128 ? x + static_cast<int>(addition) : x; });
}

// PIL's autocontrast per channel: its lowest value to 0, its highest to 255 (float32, truncated).
void autocontrast(at::Tensor& image) {
  map_channels(image, [](const uint8_t* p, int64_t n) {
    const auto [lo_it, hi_it] = std::minmax_element(p, p + n);
    const float lo = n > 0 ? *lo_it : 0.0f, hi = n > 0 ? *hi_it : 0.0f;
    Lut lut;
    for (int x = 0; x < 256; ++x) {
      float v = static_cast<float>(x);
      if (hi > lo) {
        const float scale = 255.0f / (hi - lo), offset = -lo * scale;
        v = std::clamp(v * scale + offset, 0.0f, 255.0f);
      }
      lut[static_cast<size_t>(x)] = static_cast<uint8_t>(v);
    }
    return lut;
  });
}

// PIL's equalize per channel: step = (pixels - the last used value's count) / 255; a value maps to
// (pixels below it + step / 2) / step; a channel with step 0 is left alone.
void equalize(at::Tensor& image) {
  map_channels(image, [](const uint8_t* p, int64_t n) {
    std::array<int64_t, 256> histogram{};
    for (int64_t i = 0; i < n; ++i) ++histogram[p[i]];
    int64_t last_count = 0;
    for (int64_t count : histogram)
      if (count > 0) last_count = count;
    const int64_t step = (n - last_count) / 255;
    Lut lut;
    int64_t below = 0;
    for (size_t x = 0; x < 256; ++x) {
      lut[x] = step == 0 ? static_cast<uint8_t>(x) : static_cast<uint8_t>(std::min<int64_t>(255, (below + step / 2) / step));
      below += histogram[x];
    }
    return lut;
  });
}

// The reference's blend: degenerate + factor x (image - degenerate) in float32, truncated to 8 bits
// (clipped first when the factor extrapolates).
void blend_from(at::Tensor& image, const at::Tensor& degenerate, double factor) {
  if (factor == 1.0) return;
  const float f = static_cast<float>(factor);
  uint8_t* p = image.data_ptr<uint8_t>();
  const uint8_t* d = degenerate.data_ptr<uint8_t>();
  for (int64_t i = 0; i < image.numel(); ++i) {
    const float v = static_cast<float>(d[i]) + f * (static_cast<float>(p[i]) - static_cast<float>(d[i]));
    p[i] = static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
  }
}

at::Tensor grey_copy(const at::Tensor& image) {
  at::Tensor grey = image.clone();
  rgb_to_gray(grey);
  return grey;
}

void enhance_color(at::Tensor& image, double factor) {
  check_image(image);
  blend_from(image, grey_copy(image), factor);
}

// Towards the mean grey level. The reference's TF code divides the histogram's count (the pixel
// count) by 256 instead; this is the mean PIL meant, as tensorflow/models#11219 fixed it.
void enhance_contrast(at::Tensor& image, double factor) {
  check_image(image);
  const at::Tensor grey = grey_copy(image)[0];
  const float mean = grey.numel() > 0 ? grey.to(at::kFloat).mean().item<float>() : 0.0f;
  blend_from(image, at::full_like(image, static_cast<int64_t>(std::clamp(mean, 0.0f, 255.0f))), factor);
}

void enhance_brightness(at::Tensor& image, double factor) {
  check_image(image);
  blend_from(image, at::zeros_like(image), factor);
}

// Towards PIL's SMOOTH filter ([1 1 1; 1 5 1; 1 1 1] / 13) on the inner pixels; the border keeps its own.
void enhance_sharpness(at::Tensor& image, double factor) {
  check_image(image);
  const int64_t h = image.size(1), w = image.size(2);
  at::Tensor smooth = image.clone();
  const uint8_t* src = image.data_ptr<uint8_t>();
  uint8_t* dst = smooth.data_ptr<uint8_t>();
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 1; y + 1 < h; ++y)
      for (int64_t x = 1; x + 1 < w; ++x) {
        const uint8_t* q = src + (c * h + y) * w + x;
        int sum = 4 * q[0];
        for (int64_t dy = -1; dy <= 1; ++dy)
          for (int64_t dx = -1; dx <= 1; ++dx) sum += q[dy * w + dx];
        dst[(c * h + y) * w + x] = static_cast<uint8_t>(std::min(255.0f, static_cast<float>(sum) / 13.0f));
      }
  blend_from(image, smooth, factor);
}

// ---- the operations on an Example (argument: the level's, sign included).

using OpFn = void (*)(Example&, double, Rng&);

void op_autocontrast(Example& ex, double, Rng&) { autocontrast(ex.image); }
void op_equalize(Example& ex, double, Rng&) { equalize(ex.image); }
void op_posterize(Example& ex, double bits, Rng&) { posterize(ex.image, bits); }
void op_solarize(Example& ex, double threshold, Rng&) { solarize(ex.image, threshold); }
void op_solarize_add(Example& ex, double addition, Rng&) { solarize_add(ex.image, addition); }
void op_color(Example& ex, double factor, Rng&) { enhance_color(ex.image, factor); }
void op_contrast(Example& ex, double factor, Rng&) { enhance_contrast(ex.image, factor); }
void op_brightness(Example& ex, double factor, Rng&) { enhance_brightness(ex.image, factor); }
void op_sharpness(Example& ex, double factor, Rng&) { enhance_sharpness(ex.image, factor); }

// A grey square of side 2 x half_size centred on a uniform pixel (y drawn first), cut by the image.
void op_cutout(Example& ex, double half_size, Rng& rng) {
  const int64_t pad = static_cast<int64_t>(half_size);
  const int64_t cy = index_draw(rng, 0, ex.height() - 1), cx = index_draw(rng, 0, ex.width() - 1);
  fill_rectangle(ex.image, cy - pad, cx - pad, cy + pad, cx + pad, kGrey);
}

struct PixelSpan {
  int64_t y0 = 0, x0 = 0, y1 = 0, x1 = 0;  // rows [y0, y1), columns [x0, x1)
  bool empty() const { return y1 <= y0 || x1 <= x0; }
};

// The pixels box i covers, inside the image.
PixelSpan box_pixels(const Example& ex, int64_t i) {
  const at::Tensor b = ex.boxes[i].to(at::kDouble);
  auto coord = [&](int64_t k) { return b[k].item<double>(); };
  PixelSpan s;
  s.x0 = std::clamp<int64_t>(static_cast<int64_t>(std::floor(coord(0))), 0, ex.width());
  s.y0 = std::clamp<int64_t>(static_cast<int64_t>(std::floor(coord(1))), 0, ex.height());
  s.x1 = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(coord(2))), 0, ex.width());
  s.y1 = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(coord(3))), 0, ex.height());
  return s;
}

// Cutout inside one box drawn uniformly: a grey rectangle of fraction x the box's size, centred on a
// uniform pixel of the box (y first), cut by the image (not by the box, as the reference).
void op_bbox_cutout(Example& ex, double fraction, Rng& rng) {
  if (ex.num_boxes() == 0) return;
  const PixelSpan box = box_pixels(ex, index_draw(rng, 0, ex.num_boxes() - 1));
  if (box.empty()) return;
  const int64_t pad_h = static_cast<int64_t>(fraction * static_cast<double>(box.y1 - box.y0) / 2.0);
  const int64_t pad_w = static_cast<int64_t>(fraction * static_cast<double>(box.x1 - box.x0) / 2.0);
  const int64_t cy = index_draw(rng, box.y0, box.y1 - 1), cx = index_draw(rng, box.x0, box.x1 - 1);
  fill_rectangle(ex.image, cy - pad_h, cx - pad_w, cy + pad_h, cx + pad_w, kGrey);
}

void move_content(Example& ex, const std::array<double, 6>& map) { transform_affine(ex, map, kGreyFill, kIgnoreLabel); }

// Counter-clockwise on screen by `degrees` about the image centre.
void op_rotate(Example& ex, double degrees, Rng&) {
  const double r = degrees * kPi / 180.0, c = std::cos(r), s = std::sin(r);
  const double cx = static_cast<double>(ex.width()) / 2, cy = static_cast<double>(ex.height()) / 2;
  move_content(ex, {c, s, cx - c * cx - s * cy, -s, c, cy + s * cx - c * cy});
}
// Whole pixels, towards the origin for a positive argument (the reference's sign).
void op_translate_x(Example& ex, double pixels, Rng&) { move_content(ex, {1, 0, -std::trunc(pixels), 0, 1, 0}); }
void op_translate_y(Example& ex, double pixels, Rng&) { move_content(ex, {1, 0, 0, 0, 1, -std::trunc(pixels)}); }
// Output (x, y) shows input (x + level y, y): x' = x - level y about the top-left corner.
void op_shear_x(Example& ex, double level, Rng&) { move_content(ex, {1, -level, 0, 0, 1, 0}); }
void op_shear_y(Example& ex, double level, Rng&) { move_content(ex, {1, 0, 0, -level, 1, 0}); }
void op_flip(Example& ex, double, Rng&) { transform_hflip(ex); }

// Where an operation works: the whole example, each box's pixels (the image only), or each box's
// content (pixels, masks and labels moved together).
enum class Scope { kExample, kBoxPixels, kBoxContent };

struct OpInfo {
  const char* name;
  // level -> argument: (level / 10) x scale + offset, truncated where `integral` (the reference's int()).
  double scale;
  double offset;
  bool integral;
  bool random_sign;
  Scope scope;
  OpFn run;  // on the example, or on one box's part of it
};

// The reference's NAME_TO_FUNC with level_to_arg and its hyperparameters (cutout_const 100,
// translate_const 250, cutout_bbox_const 50, translate_bbox_const 120, cutout_max_pad_fraction 0.75).
constexpr double kEnhance = 1.8, kEnhanceOffset = 0.1;
const std::array<OpInfo, 25> kOps = {{
    {"AutoContrast", 0, 0, false, false, Scope::kExample, op_autocontrast},
    {"Equalize", 0, 0, false, false, Scope::kExample, op_equalize},
    {"Posterize", 4, 0, true, false, Scope::kExample, op_posterize},
    {"Solarize", 256, 0, true, false, Scope::kExample, op_solarize},
    {"SolarizeAdd", 110, 0, true, false, Scope::kExample, op_solarize_add},
    {"Color", kEnhance, kEnhanceOffset, false, false, Scope::kExample, op_color},
    {"Contrast", kEnhance, kEnhanceOffset, false, false, Scope::kExample, op_contrast},
    {"Brightness", kEnhance, kEnhanceOffset, false, false, Scope::kExample, op_brightness},
    {"Sharpness", kEnhance, kEnhanceOffset, false, false, Scope::kExample, op_sharpness},
    {"Cutout", 100, 0, true, false, Scope::kExample, op_cutout},
    {"BBox_Cutout", 0.75, 0, false, false, Scope::kExample, op_bbox_cutout},
    {"Rotate_BBox", 30, 0, false, true, Scope::kExample, op_rotate},
    {"TranslateX_BBox", 250, 0, false, true, Scope::kExample, op_translate_x},
    {"TranslateY_BBox", 250, 0, false, true, Scope::kExample, op_translate_y},
    {"ShearX_BBox", 0.3, 0, false, true, Scope::kExample, op_shear_x},
    {"ShearY_BBox", 0.3, 0, false, true, Scope::kExample, op_shear_y},
    {"Rotate_Only_BBoxes", 30, 0, false, true, Scope::kBoxContent, op_rotate},
    {"ShearX_Only_BBoxes", 0.3, 0, false, true, Scope::kBoxContent, op_shear_x},
    {"ShearY_Only_BBoxes", 0.3, 0, false, true, Scope::kBoxContent, op_shear_y},
    {"TranslateX_Only_BBoxes", 120, 0, false, true, Scope::kBoxContent, op_translate_x},
    {"TranslateY_Only_BBoxes", 120, 0, false, true, Scope::kBoxContent, op_translate_y},
    {"Flip_Only_BBoxes", 0, 0, false, false, Scope::kBoxContent, op_flip},
    {"Solarize_Only_BBoxes", 256, 0, true, false, Scope::kBoxPixels, op_solarize},
    {"Equalize_Only_BBoxes", 0, 0, false, false, Scope::kBoxPixels, op_equalize},
    {"Cutout_Only_BBoxes", 50, 0, true, false, Scope::kBoxPixels, op_cutout},
}};

const OpInfo& find_op(const std::string& name) {
  for (const OpInfo& op : kOps)
    if (name == op.name) return op;
  throw Error(str("autoaugment_image: unknown operation ", name));
}

at::Tensor window(const at::Tensor& planes, const PixelSpan& s) {
  const int64_t d = planes.dim();
  return planes.narrow(d - 2, s.y0, s.y1 - s.y0).narrow(d - 1, s.x0, s.x1 - s.x0);
}

// Runs `op` on each box's part of the example, with chance `box_probability` each, in a random
// order (the reference shuffles them: overlapping boxes see each other's changes).
void run_on_boxes(Example& ex, const OpInfo& op, double argument, double box_probability, Rng& rng) {
  const int64_t n = ex.num_boxes();
  if (n == 0) return;
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const bool content = op.scope == Scope::kBoxContent;
  bool own_planes = false;
  for (int64_t i : order) {
    if (unit_draw(rng) >= box_probability) continue;
    const PixelSpan span = box_pixels(ex, i);
    if (span.empty()) continue;
    // The box's part as an example of its own: the operation sees it as the reference's crop does.
    Example part;
    part.image = window(ex.image, span).clone();
    part.boxes = at::zeros({0, 4}, at::kFloat);
    if (content) {
      if (!own_planes) {  // a copy of an Example shares its masks and labels
        if (ex.masks.defined()) ex.masks = ex.masks.clone();
        if (ex.label_map.defined()) ex.label_map = ex.label_map.clone();
        own_planes = true;
      }
      if (ex.masks.defined()) part.masks = window(ex.masks, span).clone();
      if (ex.label_map.defined()) part.label_map = window(ex.label_map, span).clone();
    }
    op.run(part, argument, rng);
    window(ex.image, span).copy_(part.image);
    if (content && ex.masks.defined()) window(ex.masks, span).copy_(part.masks);
    if (content && ex.label_map.defined()) window(ex.label_map, span).copy_(part.label_map);
  }
}

// ---- the policies (the reference's policy_v0 .. policy_v3).

std::vector<AutoAugmentSubPolicy> joined(std::vector<AutoAugmentSubPolicy> head, const std::vector<AutoAugmentSubPolicy>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

const std::vector<AutoAugmentSubPolicy>& policy_v0() {
  static const std::vector<AutoAugmentSubPolicy> p = {
      {{"TranslateX_BBox", 0.6, 4}, {"Equalize", 0.8, 10}},
      {{"TranslateY_Only_BBoxes", 0.2, 2}, {"Cutout", 0.8, 8}},
      {{"Sharpness", 0.0, 8}, {"ShearX_BBox", 0.4, 0}},
      {{"ShearY_BBox", 1.0, 2}, {"TranslateY_Only_BBoxes", 0.6, 6}},
      {{"Rotate_BBox", 0.6, 10}, {"Color", 1.0, 6}},
  };
  return p;
}

// v1 begins with v0's five sub-policies.
const std::vector<AutoAugmentSubPolicy>& policy_v1() {
  static const std::vector<AutoAugmentSubPolicy> p = joined(policy_v0(), {
      {{"Color", 0.0, 0}, {"ShearX_Only_BBoxes", 0.8, 4}},
      {{"ShearY_Only_BBoxes", 0.8, 2}, {"Flip_Only_BBoxes", 0.0, 10}},
      {{"Equalize", 0.6, 10}, {"TranslateX_BBox", 0.2, 2}},
      {{"Color", 1.0, 10}, {"TranslateY_Only_BBoxes", 0.4, 6}},
      {{"Rotate_BBox", 0.8, 10}, {"Contrast", 0.0, 10}},
      {{"Cutout", 0.2, 2}, {"Brightness", 0.8, 10}},
      {{"Color", 1.0, 6}, {"Equalize", 1.0, 2}},
      {{"Cutout_Only_BBoxes", 0.4, 6}, {"TranslateY_Only_BBoxes", 0.8, 2}},
      {{"Color", 0.2, 8}, {"Rotate_BBox", 0.8, 10}},
      {{"Sharpness", 0.4, 4}, {"TranslateY_Only_BBoxes", 0.0, 4}},
      {{"Sharpness", 1.0, 4}, {"SolarizeAdd", 0.4, 4}},
      {{"Rotate_BBox", 1.0, 8}, {"Sharpness", 0.2, 8}},
      {{"ShearY_BBox", 0.6, 10}, {"Equalize_Only_BBoxes", 0.6, 8}},
      {{"ShearX_BBox", 0.2, 6}, {"TranslateY_Only_BBoxes", 0.2, 10}},
      {{"SolarizeAdd", 0.6, 8}, {"Brightness", 0.8, 10}},
  });
  return p;
}

const std::vector<AutoAugmentSubPolicy>& policy_v2() {
  static const std::vector<AutoAugmentSubPolicy> p = {
      {{"Color", 0.0, 6}, {"Cutout", 0.6, 8}, {"Sharpness", 0.4, 8}},
      {{"Rotate_BBox", 0.4, 8}, {"Sharpness", 0.4, 2}, {"Rotate_BBox", 0.8, 10}},
      {{"TranslateY_BBox", 1.0, 8}, {"AutoContrast", 0.8, 2}},
      {{"AutoContrast", 0.4, 6}, {"ShearX_BBox", 0.8, 8}, {"Brightness", 0.0, 10}},
      {{"SolarizeAdd", 0.2, 6}, {"Contrast", 0.0, 10}, {"AutoContrast", 0.6, 0}},
      {{"Cutout", 0.2, 0}, {"Solarize", 0.8, 8}, {"Color", 1.0, 4}},
      {{"TranslateY_BBox", 0.0, 4}, {"Equalize", 0.6, 8}, {"Solarize", 0.0, 10}},
      {{"TranslateY_BBox", 0.2, 2}, {"ShearY_BBox", 0.8, 8}, {"Rotate_BBox", 0.8, 8}},
      {{"Cutout", 0.8, 8}, {"Brightness", 0.8, 8}, {"Cutout", 0.2, 2}},
      {{"Color", 0.8, 4}, {"TranslateY_BBox", 1.0, 6}, {"Rotate_BBox", 0.6, 6}},
      {{"Rotate_BBox", 0.6, 10}, {"BBox_Cutout", 1.0, 4}, {"Cutout", 0.2, 8}},
      {{"Rotate_BBox", 0.0, 0}, {"Equalize", 0.6, 6}, {"ShearY_BBox", 0.6, 8}},
      {{"Brightness", 0.8, 8}, {"AutoContrast", 0.4, 2}, {"Brightness", 0.2, 2}},
      {{"TranslateY_BBox", 0.4, 8}, {"Solarize", 0.4, 6}, {"SolarizeAdd", 0.2, 10}},
      {{"Contrast", 1.0, 10}, {"SolarizeAdd", 0.2, 8}, {"Equalize", 0.2, 4}},
  };
  return p;
}

const std::vector<AutoAugmentSubPolicy>& policy_v3() {
  static const std::vector<AutoAugmentSubPolicy> p = {
      {{"Posterize", 0.8, 2}, {"TranslateX_BBox", 1.0, 8}},
      {{"BBox_Cutout", 0.2, 10}, {"Sharpness", 1.0, 8}},
      {{"Rotate_BBox", 0.6, 8}, {"Rotate_BBox", 0.8, 10}},
      {{"Equalize", 0.8, 10}, {"AutoContrast", 0.2, 10}},
      {{"SolarizeAdd", 0.2, 2}, {"TranslateY_BBox", 0.2, 8}},
      {{"Sharpness", 0.0, 2}, {"Color", 0.4, 8}},
      {{"Equalize", 1.0, 8}, {"TranslateY_BBox", 1.0, 8}},
      {{"Posterize", 0.6, 2}, {"Rotate_BBox", 0.0, 10}},
      {{"AutoContrast", 0.6, 0}, {"Rotate_BBox", 1.0, 6}},
      {{"Equalize", 0.0, 4}, {"Cutout", 0.8, 10}},
      {{"Brightness", 1.0, 2}, {"TranslateY_BBox", 1.0, 6}},
      {{"Contrast", 0.0, 2}, {"ShearY_BBox", 0.8, 0}},
      {{"AutoContrast", 0.8, 10}, {"Contrast", 0.2, 10}},
      {{"Rotate_BBox", 1.0, 10}, {"Cutout", 1.0, 10}},
      {{"SolarizeAdd", 0.8, 6}, {"Equalize", 0.8, 8}},
  };
  return p;
}

}  // namespace

const std::vector<std::string>& autoaugment_policy_names() {
  static const std::vector<std::string> names = {"v0", "v1", "v2", "v3"};
  return names;
}

const std::vector<AutoAugmentSubPolicy>& autoaugment_policy(const std::string& name) {
  if (name == "v0") return policy_v0();
  if (name == "v1") return policy_v1();
  if (name == "v2") return policy_v2();
  if (name == "v3") return policy_v3();
  throw Error(str("autoaugment_image.policy_name: unknown policy '", name, "' (known: v0, v1, v2, v3)"));
}

double autoaugment_level_to_arg(const std::string& op, int level) {
  const OpInfo& info = find_op(op);
  // The reference's order of operations, so the truncation sees the same double.
  const double value = (level / kMaxLevel) * info.scale + info.offset;
  return info.integral ? std::trunc(value) : value;
}

bool autoaugment_random_sign(const std::string& op) { return find_op(op).random_sign; }

void apply_autoaugment_op(Example& ex, const std::string& op, double argument, double box_probability, Rng& rng) {
  const OpInfo& info = find_op(op);
  check_image(ex.image);
  if (info.scope == Scope::kExample) info.run(ex, argument, rng);
  else run_on_boxes(ex, info, argument, box_probability, rng);
}

void autoaugment_image(Example& ex, const std::string& policy_name, Rng& rng) {
  const std::vector<AutoAugmentSubPolicy>& policy = autoaugment_policy(policy_name);
  const AutoAugmentSubPolicy& chosen = policy[static_cast<size_t>(index_draw(rng, 0, static_cast<int64_t>(policy.size()) - 1))];
  for (const AutoAugmentOp& op : chosen) {
    const OpInfo& info = find_op(op.name);
    const bool per_box = info.scope != Scope::kExample;
    // The box-only operations gate each box instead (a third of the probability).
    if (!per_box && unit_draw(rng) >= op.probability) continue;
    double argument = autoaugment_level_to_arg(op.name, op.level);
    if (info.random_sign && unit_draw(rng) < 0.5) argument = -argument;
    apply_autoaugment_op(ex, op.name, argument, op.probability / 3.0, rng);
  }
}

}  // namespace detseg
