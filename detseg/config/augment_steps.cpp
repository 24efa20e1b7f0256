// Implements: the augmentation step catalogue (names, parameters, defaults, docs), reading and
// writing one step in YAML, and resolving train_input.augment against the older keys.
#include "detseg/config/augment_steps.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <set>
#include <sstream>

#include "detseg/config/config.h"
#include "detseg/config/registry.h"
#include "detseg/core/error.h"

namespace detseg {
namespace {

using Kind = AugmentParamInfo::Kind;

AugmentParamInfo number(const std::string& name, double value, double lo, double hi, const std::string& doc) {
  AugmentParamInfo p;
  p.name = name;
  p.kind = Kind::kNumber;
  p.default_numbers = {value};
  p.min = lo;
  p.max = hi;
  p.doc = doc;
  return p;
}

AugmentParamInfo integer(const std::string& name, int64_t value, double lo, double hi, const std::string& doc) {
  AugmentParamInfo p = number(name, static_cast<double>(value), lo, hi, doc);
  p.kind = Kind::kInteger;
  return p;
}

AugmentParamInfo flag(const std::string& name, bool value, const std::string& doc) {
  AugmentParamInfo p = number(name, value ? 1 : 0, 0, 1, doc);
  p.kind = Kind::kBool;
  return p;
}

AugmentParamInfo numbers(const std::string& name, std::vector<double> value, size_t lo_items, size_t hi_items,
                         double lo, double hi, const std::string& doc) {
  AugmentParamInfo p = number(name, 0, lo, hi, doc);
  p.kind = Kind::kNumbers;
  p.default_numbers = std::move(value);
  p.min_items = lo_items;
  p.max_items = hi_items;
  return p;
}

AugmentParamInfo text(const std::string& name, const std::string& value, std::vector<std::string> choices,
                      const std::string& doc) {
  AugmentParamInfo p;
  p.name = name;
  p.kind = Kind::kText;
  p.default_text = value;
  p.choices = std::move(choices);
  p.doc = doc;
  return p;
}

// "a <= b" for two number parameters, or for the two values of a range parameter.
std::function<std::string(const AugmentStep&)> ordered(std::vector<std::pair<std::string, std::string>> pairs,
                                                       std::vector<std::string> ranges = {}) {
  return [pairs, ranges](const AugmentStep& s) -> std::string {
    for (const auto& [lo, hi] : pairs)
      if (s.number(lo) > s.number(hi)) return lo + " (" + str(s.number(lo)) + ") must not exceed " + hi + " (" +
                                              str(s.number(hi)) + ")";
    for (const auto& r : ranges) {
      const auto& v = s.numbers(r);
      if (v.size() == 2 && v[0] > v[1]) return r + ": the first value must not exceed the second";
    }
    return "";
  };
}

// The crop parameters random_crop_image and random_crop_pad_image share (preprocessor.py's names).
std::vector<AugmentParamInfo> crop_params() {
  return {
      number("min_object_covered", 1.0, 0, 1,
             "The crop covers at least this fraction of at least one box (no boxes: of the whole image)"),
      numbers("aspect_ratio_range", {0.75, 1.33}, 2, 2, 1e-3, 1e3, "Crop width/height range"),
      numbers("area_range", {0.1, 1.0}, 2, 2, 1e-4, 1, "Crop area as a fraction of the image's"),
      number("overlap_thresh", 0.3, 0, 1, "A box is kept when at least this fraction of it lies inside the crop"),
      flag("clip_boxes", true,
           "Kept boxes cut by the crop are clipped to it; false: they are dropped (detseg keeps no box outside "
           "its image)"),
      number("random_coef", 0.0, 0, 1, "Chance of keeping the image uncropped"),
  };
}

std::vector<AugmentStepInfo> build_catalogue() {
  std::vector<AugmentStepInfo> c;
  auto add = [&](std::string name, std::string family, double probability, std::string doc,
                 std::vector<AugmentParamInfo> params = {}) -> AugmentStepInfo& {
    AugmentStepInfo s;
    s.name = std::move(name);
    s.family = std::move(family);
    s.probability = probability;
    s.doc = std::move(doc);
    s.params = std::move(params);
    c.push_back(std::move(s));
    return c.back();
  };
  // Geometric.
  add("random_horizontal_flip", "geometric", 0.5,
      "Mirrors image, boxes, masks and label map left-right (x -> W - x)");
  add("random_vertical_flip", "geometric", 0.5, "Mirrors them top-bottom (y -> H - y)");
  add("random_rotation90", "geometric", 0.5,
      "Rotates them 90 degrees counter-clockwise: box [x1, y1, x2, y2] -> [y1, W - x2, y2, W - x1], size H x W -> W x H");
  add("random_image_scale", "geometric", 1.0,
      "Resizes by s ~ U(min_scale_ratio, max_scale_ratio): each side floor(side * s), image bilinear, masks and "
      "label map nearest",
      {number("min_scale_ratio", 0.5, 0.01, 100, "Smallest scale"),
       number("max_scale_ratio", 2.0, 0.01, 100, "Largest scale")})
      .check = ordered({{"min_scale_ratio", "max_scale_ratio"}});
  add("random_jitter_boxes", "geometric", 1.0,
      "Moves each box side by U(-ratio, ratio) x the box's height or width (boxes only: masks keep their pixels), "
      "clipped to the image",
      {number("ratio", 0.05, 0, 0.5, "Largest move as a fraction of the box side"),
       text("jitter_mode", "default", {"default", "expand", "shrink", "expand_symmetric", "shrink_symmetric"},
            "default: each side independently in [-ratio, ratio]; expand/shrink: [0, ratio] outward/inward; "
            "*_symmetric: one draw per box for all sides")});
  // Colour: each works on [0, 1] pixel values and rounds back to 8 bits.
  add("random_adjust_brightness", "colour", 1.0,
      "Adds delta ~ U(-max_delta, max_delta) to every pixel on the [0, 1] scale, clipped (tf.image.adjust_brightness)",
      {number("max_delta", 0.2, 0, 1, "Largest brightness change")});
  add("random_adjust_contrast", "colour", 1.0,
      "Per channel (x - mean) * f + mean with f ~ U(min_delta, max_delta), clipped (tf.image.adjust_contrast)",
      {number("min_delta", 0.8, 0, 10, "Smallest contrast factor"),
       number("max_delta", 1.25, 0, 10, "Largest contrast factor")})
      .check = ordered({{"min_delta", "max_delta"}});
  add("random_adjust_hue", "colour", 1.0,
      "Adds delta ~ U(-max_delta, max_delta) to the HSV hue (turns, modulo 1) (tf.image.adjust_hue)",
      {number("max_delta", 0.02, 0, 0.5, "Largest hue change in turns")});
  add("random_adjust_saturation", "colour", 1.0,
      "Multiplies the HSV saturation by f ~ U(min_delta, max_delta), clipped to [0, 1] "
      "(tf.image.adjust_saturation)",
      {number("min_delta", 0.8, 0, 10, "Smallest saturation factor"),
       number("max_delta", 1.25, 0, 10, "Largest saturation factor")})
      .check = ordered({{"min_delta", "max_delta"}});
  add("random_distort_color", "colour", 1.0,
      "The reference's colour distortion: brightness 32/255, saturation 0.5-1.5, hue 0.2, contrast 0.5-1.5, in "
      "that order (color_ordering 0) or brightness, contrast, saturation, hue (1)",
      {integer("color_ordering", 0, 0, 1, "0 or 1: the order of the four changes")});
  add("random_rgb_to_gray", "colour", 0.1,
      "Replaces R, G and B by 0.2989 R + 0.5870 G + 0.1140 B (tf.image.rgb_to_grayscale)");
  add("random_pixel_value_scale", "colour", 1.0,
      "Multiplies every pixel value by its own U(minval, maxval), clipped to [0, 255]",
      {number("minval", 0.9, 0, 10, "Smallest factor"), number("maxval", 1.1, 0, 10, "Largest factor")})
      .check = ordered({{"minval", "maxval"}});
  add("random_black_patches", "colour", -1,
      "Up to max_black_patches tries, each adding with `probability` a black square of side "
      "size_to_image_ratio x min(H, W) at a uniform position",
      {integer("max_black_patches", 10, 0, 1000, "Number of tries"),
       number("probability", 0.5, 0, 1, "Chance of a patch at each try"),
       number("size_to_image_ratio", 0.1, 0, 1, "Patch side over the image's shorter side")});
  add("random_jpeg_quality", "colour", 1.0,
      "Encodes and decodes the image as JPEG at a quality ~ U{min_jpeg_quality .. max_jpeg_quality - 1}",
      {number("random_coef", 0.0, 0, 1, "Chance of keeping the image as it is"),
       integer("min_jpeg_quality", 0, 0, 100, "Lowest quality"),
       integer("max_jpeg_quality", 100, 0, 100, "Highest quality (exclusive unless equal to the lowest)")})
      .check = ordered({{"min_jpeg_quality", "max_jpeg_quality"}});
  add("random_patch_gaussian", "colour", 1.0,
      "Adds N(0, sigma^2) noise on the [0, 1] scale, sigma ~ U(min_gaussian_stddev, max_gaussian_stddev), inside "
      "a square of side ~ U{min_patch_size .. max_patch_size - 1} centred on a uniform pixel (Lopes et al. 2019)",
      {number("random_coef", 0.0, 0, 1, "Chance of keeping the image as it is"),
       integer("min_patch_size", 1, 1, 1e6, "Smallest patch side in pixels"),
       integer("max_patch_size", 250, 1, 1e6, "Largest patch side in pixels"),
       number("min_gaussian_stddev", 0.0, 0, 10, "Smallest noise sigma"),
       number("max_gaussian_stddev", 1.0, 0, 10, "Largest noise sigma")})
      .check = ordered({{"min_patch_size", "max_patch_size"}, {"min_gaussian_stddev", "max_gaussian_stddev"}});
  // Colour and geometry together.
  add("autoaugment_image", "policy", 1.0,
      "EfficientDet's AutoAugment for detection (Zoph et al. 2019): one sub-policy of the policy drawn uniformly, "
      "each of its operations run with its probability at its magnitude (the reference's tables); rotations, "
      "shears and translations move boxes (extent of the moved corners, clipped), masks and label map with the "
      "pixels, uncovered pixels grey 128; *_Only_BBoxes operations change pixels inside boxes only",
      {text("policy_name", "v0", {"v0", "v1", "v2", "v3"},
            "v0: the paper's policy (5 sub-policies); v1 (20), v2 and v3 (15 each): the reference's others")});
  // Crops and pads.
  add("random_crop_image", "crop", 1.0,
      "Crops a window sampled as tf.image.sample_distorted_bounding_box does (100 tries, else the whole image); "
      "boxes less than overlap_thresh inside are dropped, masks and label map cropped with the image",
      crop_params())
      .check = ordered({}, {"aspect_ratio_range", "area_range"});
  add("random_pad_image", "crop", 1.0,
      "Pads to a size ~ U{min .. max - 1} per side with the image at a uniform offset; padding pad_color (RGB "
      "0-255; []: the image's mean colour), masks 0, label map the ignore label 255",
      {integer("min_image_height", 0, 0, 1e5, "Smallest padded height (0: the image's)"),
       integer("min_image_width", 0, 0, 1e5, "Smallest padded width (0: the image's)"),
       integer("max_image_height", 0, 0, 1e5, "Largest padded height (0: twice the image's)"),
       integer("max_image_width", 0, 0, 1e5, "Largest padded width (0: twice the image's)"),
       numbers("pad_color", {}, 0, 3, 0, 255, "Padding RGB; []: the image's mean colour")})
      .check = [](const AugmentStep& s) -> std::string {
    if (!s.numbers("pad_color").empty() && s.numbers("pad_color").size() != 3) return "pad_color: 3 values or []";
    return "";
  };
  {
    std::vector<AugmentParamInfo> p = crop_params();
    p.push_back(numbers("min_padded_size_ratio", {1.0, 1.0}, 2, 2, 0, 100,
                        "Smallest padded height, width over the image's before the crop"));
    p.push_back(numbers("max_padded_size_ratio", {2.0, 2.0}, 2, 2, 0, 100,
                        "Largest padded height, width over the image's before the crop"));
    p.push_back(numbers("pad_color", {}, 0, 3, 0, 255, "Padding RGB; []: the crop's mean colour"));
    add("random_crop_pad_image", "crop", 1.0,
        "random_crop_image, then random_pad_image to a size between min_padded_size_ratio and "
        "max_padded_size_ratio times the image's size before the crop",
        std::move(p))
        .check = [](const AugmentStep& s) -> std::string {
      std::string e = ordered({}, {"aspect_ratio_range", "area_range"})(s);
      if (!e.empty()) return e;
      if (!s.numbers("pad_color").empty() && s.numbers("pad_color").size() != 3) return "pad_color: 3 values or []";
      for (int k = 0; k < 2; ++k)
        if (s.numbers("min_padded_size_ratio")[k] > s.numbers("max_padded_size_ratio")[k])
          return "min_padded_size_ratio must not exceed max_padded_size_ratio";
      return "";
    };
  }
  add("ssd_random_crop", "crop", 1.0,
      "SSD's crop (Liu et al. 2016): one of the operations picked uniformly, each a random_crop_image with its own "
      "min_object_covered and overlap_thresh (the i-th of each list)",
      {numbers("min_object_covered", {0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0}, 1, 32, 0, 1,
               "Per operation: the crop covers at least this fraction of one box"),
       numbers("aspect_ratio_range", {0.5, 2.0}, 2, 2, 1e-3, 1e3, "Crop width/height range (all operations)"),
       numbers("area_range", {0.1, 1.0}, 2, 2, 1e-4, 1, "Crop area fraction range (all operations)"),
       numbers("overlap_thresh", {0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0}, 1, 32, 0, 1,
               "Per operation: fraction of a box inside the crop to keep it"),
       flag("clip_boxes", true, "Clip cut boxes to the crop; false: drop them"),
       number("random_coef", 0.15, 0, 1, "Chance of keeping the image uncropped (every operation)")})
      .check = [](const AugmentStep& s) -> std::string {
    std::string e = ordered({}, {"aspect_ratio_range", "area_range"})(s);
    if (!e.empty()) return e;
    if (s.numbers("min_object_covered").size() != s.numbers("overlap_thresh").size())
      return "min_object_covered and overlap_thresh need one value per operation each (same length)";
    return "";
  };
  // Sizing.
  add("random_scale_crop_and_pad_to_square", "size", 1.0,
      "Large-scale jitter (EfficientDet, Ghiasi et al. 2021): the longer side to output_size x s, "
      "s ~ U(scale_min, scale_max), a random output_size square crop where larger, padded bottom/right to the square",
      {integer("output_size", 512, 0, 8192, "Square output side (0: model.image_size)"),
       number("scale_min", 0.1, 0.01, 100, "Smallest scale"), number("scale_max", 2.0, 0.01, 100, "Largest scale")})
      .check = ordered({{"scale_min", "scale_max"}});
  c.back().sizing = true;
  add("resize_to_fit", "size", 1.0,
      "model.resizer fixed: the largest scale that fits a size x size square (aspect kept), padded bottom/right",
      {integer("size", 0, 0, 8192, "Square side (0: the model's input size)")});
  c.back().sizing = true;
  add("resize_min_max", "size", 1.0,
      "model.resizer keep_aspect: shorter side to min_dimension unless the longer would pass max_dimension, both "
      "times s ~ U(scale_min, scale_max) (multi-scale training)",
      {integer("min_dimension", 0, 0, 8192, "Shorter side target (0: model.min_dimension)"),
       integer("max_dimension", 0, 0, 8192, "Longer side limit (0: model.max_dimension)"),
       number("scale_min", 1.0, 0.05, 10, "Smallest scale"), number("scale_max", 1.0, 0.05, 10, "Largest scale")})
      .check = ordered({{"scale_min", "scale_max"}});
  c.back().sizing = true;
  add("scale_jitter_crop", "size", 1.0,
      "EfficientDet's training resize: fit output_size x s, s ~ U(scale_min, scale_max), then a random "
      "output_size square crop, padded bottom/right",
      {integer("output_size", 0, 0, 8192, "Square side (0: the model's input size)"),
       number("scale_min", 0.1, 0.05, 10, "Smallest scale"), number("scale_max", 2.0, 0.05, 10, "Largest scale")})
      .check = ordered({{"scale_min", "scale_max"}});
  c.back().sizing = true;
  add("deeplab_scale_crop_pad", "size", 1.0,
      "DeepLab's training resize: scale by one of scale_min, scale_min + scale_step, ..., scale_max (0: "
      "continuous), pad to crop_size with the mean colour and the ignore label, random crop_size square crop",
      {integer("crop_size", 0, 0, 8192, "Square crop side (0: model.deeplab.crop_size)"),
       number("scale_min", 0.5, 0.05, 10, "Smallest scale"), number("scale_max", 2.0, 0.05, 10, "Largest scale"),
       number("scale_step", 0.25, 0, 10, "Scale step (0: continuous)")})
      .check = ordered({{"scale_min", "scale_max"}});
  c.back().sizing = true;
  // Mixing images: the other images are drawn from the data set with this example's random stream
  // and go through the steps listed before this one.
  add("mosaic", "mix", 1.0,
      "Ultralytics' mosaic: this image and three others, each fitted to output_size, meet at a random centre in "
      "the middle half of a 2 output_size canvas (grey 114), whose central output_size square is kept",
      {integer("output_size", 0, 0, 8192, "Output side (0: the model's input size)"),
       integer("off_last_steps", 0, 0, 1e9, "No mosaic in the last N training steps (Ultralytics' close_mosaic)")});
  add("mixup", "mix", 1.0,
      "Blends another image in, r x this + (1 - r) x other with r ~ Beta(alpha, alpha); the other fitted to this "
      "image's size (top-left, grey 114 around); boxes of both kept",
      {number("alpha", 32.0, 0.01, 1000, "Beta distribution parameter (Ultralytics: 32, r near 0.5)")});
  c.back().needs_boxes = true;
  add("copy_paste", "mix", 1.0,
      "Simple copy-paste (Ghiasi et al. 2021): another image's instances, each with instance_probability (at "
      "least one), fitted to this image's size and pasted over it; covered parts of this image's masks are removed, "
      "their boxes recomputed, wholly covered instances dropped",
      {number("instance_probability", 0.5, 0, 1, "Chance each instance of the other image is pasted")});
  c.back().needs_masks = true;
  return c;
}

std::string format_number(double x) {
  std::ostringstream os;
  for (int precision = 6; precision <= 17; ++precision) {
    os.str("");
    os.precision(precision);
    os << x;
    if (std::strtod(os.str().c_str(), nullptr) == x) break;
  }
  return os.str();
}

std::string show_value(const AugmentParamInfo& p, const AugmentValue& v) {
  switch (p.kind) {
    case Kind::kText:
      return v.text;
    case Kind::kBool:
      return v.numbers.at(0) != 0 ? "true" : "false";
    case Kind::kNumbers: {
      std::string out = "[";
      for (size_t i = 0; i < v.numbers.size(); ++i) out += (i ? ", " : "") + format_number(v.numbers[i]);
      return out + "]";
    }
    default:
      return format_number(v.numbers.at(0));
  }
}

std::string known_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

bool parse_number_text(const std::string& text, double& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return *end == '\0' && std::isfinite(out);
}

const AugmentValue& value_of(const AugmentStep& s, const std::string& key) {
  for (const auto& [name, value] : s.params)
    if (name == key) return value;
  throw Error(str("augmentation step ", s.name, " has no parameter ", key));
}

}  // namespace

const std::vector<AugmentStepInfo>& augment_steps() {
  static const std::vector<AugmentStepInfo> catalogue = build_catalogue();
  return catalogue;
}

const AugmentStepInfo* find_augment_step(const std::string& name) {
  for (const AugmentStepInfo& s : augment_steps())
    if (s.name == name) return &s;
  return nullptr;
}

double AugmentStep::number(const std::string& key) const { return value_of(*this, key).numbers.at(0); }
int64_t AugmentStep::integer(const std::string& key) const { return std::llround(number(key)); }
bool AugmentStep::flag(const std::string& key) const { return number(key) != 0; }
const std::vector<double>& AugmentStep::numbers(const std::string& key) const { return value_of(*this, key).numbers; }
const std::string& AugmentStep::text(const std::string& key) const { return value_of(*this, key).text; }

AugmentStep& AugmentStep::set(const std::string& key, double value) {
  if (key == "probability" && find_augment_step(name) && find_augment_step(name)->probability >= 0) {
    probability = value;
    return *this;
  }
  return set_numbers(key, {value});
}

AugmentStep& AugmentStep::set_numbers(const std::string& key, std::vector<double> values) {
  const_cast<AugmentValue&>(value_of(*this, key)).numbers = std::move(values);
  return *this;
}

AugmentStep& AugmentStep::set_text(const std::string& key, const std::string& value) {
  const_cast<AugmentValue&>(value_of(*this, key)).text = value;
  return *this;
}

AugmentStep make_augment_step(const std::string& name) {
  const AugmentStepInfo* info = find_augment_step(name);
  DETSEG_CHECK(info != nullptr, "unknown augmentation step ", name);
  AugmentStep s;
  s.name = name;
  s.probability = info->probability >= 0 ? info->probability : 1.0;
  for (const AugmentParamInfo& p : info->params) s.params.emplace_back(p.name, AugmentValue{p.default_numbers, p.default_text});
  return s;
}

AugmentStep parse_augment_step(const YAML::Node& node, const std::string& path,
                               const std::function<std::string(const YAML::Node&)>& where) {
  std::vector<std::string> names;
  for (const AugmentStepInfo& s : augment_steps()) names.push_back(s.name);
  YAML::Node name_node, body;
  if (node.IsScalar()) {
    name_node = node;
  } else if (node.IsMap() && node.size() == 1) {
    name_node = node.begin()->first;
    body = node.begin()->second;
  } else {
    throw ConfigError(where(node) + path + ": expected a step, `- name: {param: value, ...}` or `- name`, got " +
                      (node.IsMap() ? str("a mapping of ", node.size(), " keys") : node.IsSequence() ? "a list" : "nothing"));
  }
  const std::string name = name_node.Scalar();
  const AugmentStepInfo* info = find_augment_step(name);
  if (!info)
    throw ConfigError(where(name_node) + path + ": unknown augmentation step '" + name + "' (known: " +
                      known_names(names) + ")");
  AugmentStep step = make_augment_step(name);
  step.where = where(name_node);
  const std::string at = path + " (" + name + ")";
  if (body.IsDefined() && !body.IsNull()) {
    if (!body.IsMap())
      throw ConfigError(where(body) + at + ": expected its parameters as a mapping {param: value, ...}");
    std::set<std::string> seen;
    for (const auto& item : body) {
      const std::string key = item.first.Scalar();
      const YAML::Node& value = item.second;
      const std::string key_path = path + "." + name + "." + key;
      if (!seen.insert(key).second) throw ConfigError(where(item.first) + key_path + ": given twice");
      if (key == "probability" && info->probability >= 0) {
        double p = 0;
        if (!value.IsScalar() || !parse_number_text(value.Scalar(), p) || p < 0 || p > 1)
          throw ConfigError(where(value) + key_path + ": expected a number in [0, 1] (the chance " + name +
                            " runs)");
        step.probability = p;
        continue;
      }
      const AugmentParamInfo* param = nullptr;
      for (const AugmentParamInfo& p : info->params)
        if (p.name == key) param = &p;
      if (!param) {
        std::vector<std::string> keys;
        if (info->probability >= 0) keys.push_back("probability");
        for (const AugmentParamInfo& p : info->params) keys.push_back(p.name);
        throw ConfigError(where(item.first) + key_path + ": unknown parameter of " + name + " (known: " +
                          (keys.empty() ? std::string("none") : known_names(keys)) + ")");
      }
      AugmentValue parsed;
      const std::string range = param->min > -1e299 ? str(" in [", format_number(param->min), ", ",
                                                          format_number(param->max), "]")
                                                    : "";
      auto read_number = [&](const YAML::Node& n, double& out, bool integral) {
        if (!n.IsScalar() || !parse_number_text(n.Scalar(), out) || out < param->min || out > param->max ||
            (integral && out != std::floor(out)))
          throw ConfigError(where(n) + key_path + ": expected " + (integral ? "an integer" : "a number") + range +
                            ", got " + (n.IsScalar() ? "\"" + n.Scalar() + "\"" : std::string("a list or mapping")));
      };
      switch (param->kind) {
        case Kind::kNumber:
        case Kind::kInteger: {
          double x = 0;
          read_number(value, x, param->kind == Kind::kInteger);
          parsed.numbers = {x};
          break;
        }
        case Kind::kBool: {
          static const std::set<std::string> yes = {"true", "True", "TRUE", "yes", "on"};
          static const std::set<std::string> no = {"false", "False", "FALSE", "no", "off"};
          if (!value.IsScalar() || (!yes.count(value.Scalar()) && !no.count(value.Scalar())))
            throw ConfigError(where(value) + key_path + ": expected true or false");
          parsed.numbers = {yes.count(value.Scalar()) ? 1.0 : 0.0};
          break;
        }
        case Kind::kNumbers: {
          if (!value.IsSequence() || value.size() < param->min_items || value.size() > param->max_items)
            throw ConfigError(where(value) + key_path + ": expected a list of " +
                              (param->min_items == param->max_items ? str(param->min_items)
                                                                    : str(param->min_items, " to ", param->max_items)) +
                              " numbers" + range);
          for (const auto& v : value) {
            double x = 0;
            read_number(v, x, false);
            parsed.numbers.push_back(x);
          }
          break;
        }
        case Kind::kText: {
          bool ok = value.IsScalar();
          for (size_t i = 0; ok && i < param->choices.size(); ++i)
            if (param->choices[i] == value.Scalar()) parsed.text = value.Scalar();
          if (!ok || parsed.text.empty())
            throw ConfigError(where(value) + key_path + ": expected one of " + known_names(param->choices) + ", got " +
                              (ok ? "\"" + value.Scalar() + "\"" : std::string("a list or mapping")));
          break;
        }
      }
      const_cast<AugmentValue&>(value_of(step, key)) = parsed;
    }
  }
  if (info->check) {
    const std::string problem = info->check(step);
    if (!problem.empty()) throw ConfigError(step.where + at + ": " + problem);
  }
  return step;
}

void emit_augment_step(YAML::Emitter& out, const AugmentStep& step) {
  const AugmentStepInfo* info = find_augment_step(step.name);
  DETSEG_CHECK(info != nullptr, "unknown augmentation step ", step.name);
  out << YAML::BeginMap << YAML::Key << step.name << YAML::Value << YAML::Flow << YAML::BeginMap;
  if (info->probability >= 0) out << YAML::Key << "probability" << YAML::Value << format_number(step.probability);
  for (size_t i = 0; i < info->params.size(); ++i) {
    const AugmentParamInfo& p = info->params[i];
    const AugmentValue& v = value_of(step, p.name);
    out << YAML::Key << p.name << YAML::Value;
    switch (p.kind) {
      case Kind::kText:
        out << v.text;
        break;
      case Kind::kBool:
        out << (v.numbers.at(0) != 0);
        break;
      case Kind::kInteger:
        out << static_cast<long long>(std::llround(v.numbers.at(0)));
        break;
      case Kind::kNumber:
        out << format_number(v.numbers.at(0));
        break;
      case Kind::kNumbers:
        out << YAML::Flow << YAML::BeginSeq;
        for (double x : v.numbers) out << format_number(x);
        out << YAML::EndSeq;
        break;
    }
  }
  out << YAML::EndMap << YAML::EndMap;
}

namespace {

// The model's own training resize, as the older keys asked for it.
AugmentStep model_sizing_step(const PipelineConfig& c, double scale_min, double scale_max) {
  const ModelTypeInfo* type = find_model_type(c.model.type);
  if (type && type->kind == "segmenter") {
    return make_augment_step("deeplab_scale_crop_pad")
        .set("scale_min", scale_min)
        .set("scale_max", scale_max)
        .set("scale_step", c.model.deeplab.scale_step);
  }
  if (c.model.resizer == "keep_aspect")
    return make_augment_step("resize_min_max").set("scale_min", scale_min).set("scale_max", scale_max);
  if (scale_min != 1.0 || scale_max != 1.0)
    return make_augment_step("scale_jitter_crop").set("scale_min", scale_min).set("scale_max", scale_max);
  return make_augment_step("resize_to_fit");
}

}  // namespace

void resolve_augment_lists(PipelineConfig& c) {
  auto refuse_on_eval = [](const InputConfig& input, const std::string& key) {
    if (!input.augment.steps.empty())
      throw ConfigError(input.augment.steps.front().where + key +
                        ".augment: augmentation is for train_input; evaluation images get the model's resize only");
  };
  refuse_on_eval(c.eval_input, "eval_input");
  for (const auto& [name, input] : c.eval_inputs) refuse_on_eval(input, "eval_inputs." + name);

  InputConfig& in = c.train_input;
  if (in.augment.resolved) return;  // read back from a resolved config: nothing left to do
  const bool older_keys = in.hflip || in.scale_min != 1.0 || in.scale_max != 1.0;
  if (in.augment.where.empty()) {
    // Left out: today's list from the older keys, which then say nothing more.
    AugmentList list;
    list.where = location(c.source);
    if (in.hflip) list.steps.push_back(make_augment_step("random_horizontal_flip"));
    DETSEG_CONFIG_CHECK(in.scale_min <= in.scale_max, location(c.source),
                        "train_input.scale_min must not exceed train_input.scale_max");
    list.steps.push_back(model_sizing_step(c, in.scale_min, in.scale_max));
    in.augment = std::move(list);
    in.hflip = false;
    in.scale_min = in.scale_max = 1.0;
  } else if (older_keys) {
    throw ConfigError(in.augment.where +
                      "train_input.augment replaces train_input.hflip, scale_min and scale_max: give the flip "
                      "(random_horizontal_flip) and the scale range (the sizing step's scale_min/scale_max) in the list");
  }
  const ModelTypeInfo* type = find_model_type(c.model.type);
  const bool segmenter = type && type->kind == "segmenter";
  const bool masks = type && type->instance_masks;
  bool sized = false;
  for (const AugmentStep& s : in.augment.steps) {
    const AugmentStepInfo* info = find_augment_step(s.name);
    sized = sized || info->sizing;
    if (info->needs_boxes && segmenter)
      throw ConfigError(s.where + "train_input.augment: " + s.name + " mixes boxes; " + c.model.type +
                        " trains on label maps");
    if (info->needs_masks && !masks)
      throw ConfigError(s.where + "train_input.augment: " + s.name + " pastes instance masks; " + c.model.type +
                        " has none (mask_rcnn has)");
    if (s.name == "deeplab_scale_crop_pad" && !segmenter)
      throw ConfigError(s.where + "train_input.augment: deeplab_scale_crop_pad is DeepLab's; a detector takes "
                        "resize_to_fit, resize_min_max, scale_jitter_crop or random_scale_crop_and_pad_to_square");
  }
  if (!sized) in.augment.steps.push_back(model_sizing_step(c, 1.0, 1.0));
  in.augment.resolved = true;
}

std::string augment_steps_markdown() {
  std::ostringstream out;
  out << "| step | `probability` | parameters (default) | effect |\n|---|---|---|---|\n";
  for (const AugmentStepInfo& s : augment_steps()) {
    out << "| `" << s.name << "` | " << (s.probability >= 0 ? format_number(s.probability) : std::string("—"))
        << " | ";
    if (s.params.empty()) out << "—";
    for (size_t i = 0; i < s.params.size(); ++i) {
      const AugmentParamInfo& p = s.params[i];
      out << (i ? "<br>" : "") << "`" << p.name << "` (`" << show_value(p, AugmentValue{p.default_numbers, p.default_text})
          << "`): " << p.doc;
    }
    out << " | " << s.doc << " |\n";
  }
  return out.str();
}

}  // namespace detseg
