// Implements: tests of train_input.augment end to end: the config list (names, parameters, file:line
// errors, the older keys resolving to the list), the steps run by the pipeline (gates, worked
// values), a property test of every step on random images with boxes and masks, and the loader's
// determinism with image-mixing steps (worker counts, resume).
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "../temp_dir.h"
#include "data_test_util.h"
#include "detseg/config/config.h"
#include "detseg/config/registry.h"
#include "detseg/data/loader.h"
#include "detseg/data/transforms/colour.h"
#include "detseg/data/transforms/geometry.h"
#include "detseg/data/transforms/steps.h"
#include "detseg/engine/inputs.h"
#include "test_paths.h"

using namespace detseg;
namespace fs = std::filesystem;
using detseg::datatest::synthetic_example;

namespace {

const char* kConfig =
    "model:\n"
    "  num_classes: 3\n"
    "  image_size: 64\n"
    "train_input:\n"
    "  annotations: data/train.json\n";

std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(yaml, "configs/x.yaml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

std::vector<std::string> names_of(const std::vector<AugmentStep>& steps) {
  std::vector<std::string> out;
  for (const AugmentStep& s : steps) out.push_back(s.name);
  return out;
}

// One instance mask per (integer) box, exactly its pixels.
at::Tensor box_masks(const Example& ex) {
  at::Tensor masks = at::zeros({ex.num_boxes(), ex.height(), ex.width()}, at::kByte);
  for (int64_t i = 0; i < ex.num_boxes(); ++i) {
    const auto b = ex.boxes[i].to(at::kLong);
    masks[i].narrow(0, b[1].item<int64_t>(), (b[3] - b[1]).item<int64_t>())
        .narrow(1, b[0].item<int64_t>(), (b[2] - b[0]).item<int64_t>())
        .fill_(1);
  }
  return masks;
}

// A random h x w (40-90) example with 0-4 integer boxes (6+ px), their masks, crowd flags and a
// label map of values 0-3.
Example random_example(Rng& rng, int64_t id = 0) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const int64_t h = pick(40, 90), w = pick(40, 90);
  std::vector<std::vector<float>> boxes;
  for (int64_t k = pick(0, 4); k > 0; --k) {
    const int64_t x1 = pick(0, w - 8), y1 = pick(0, h - 8);
    const int64_t x2 = pick(x1 + 6, std::min(w, x1 + 40)), y2 = pick(y1 + 6, std::min(h, y1 + 40));
    boxes.push_back({static_cast<float>(x1), static_cast<float>(y1), static_cast<float>(x2), static_cast<float>(y2)});
  }
  Example ex = synthetic_example(h, w, boxes);
  // From `rng` only (not torch's global generator): the loader tests load from several threads.
  ex.image = at::empty({3, h, w}, at::kByte);
  ex.label_map = at::empty({h, w}, at::kByte);
  for (int64_t i = 0; i < 3 * h * w; ++i) ex.image.data_ptr<uint8_t>()[i] = static_cast<uint8_t>(pick(0, 255));
  for (int64_t i = 0; i < h * w; ++i) ex.label_map.data_ptr<uint8_t>()[i] = static_cast<uint8_t>(pick(0, 3));
  ex.masks = box_masks(ex);
  ex.iscrowd = at::zeros({ex.num_boxes()}, at::kBool);
  if (ex.num_boxes() > 0) ex.iscrowd[0] = true;
  ex.image_id = id;
  return ex;
}

// The step with its gate open and the sizes a loader would resolve.
AugmentStep always(const std::string& name) {
  AugmentStep s = make_augment_step(name);
  s.probability = 1;
  for (const char* key : {"size", "output_size", "crop_size"})
    for (const auto& [param, value] : s.params)
      if (param == key) s.set(key, 64);
  if (name == "resize_min_max") s.set("min_dimension", 48).set("max_dimension", 80);
  return s;
}

Example run_steps(Example ex, std::vector<AugmentStep> steps, uint64_t seed, AugmentContext context = {}) {
  AugmentOptions o;
  o.resize = AugmentOptions::Resize::kNone;
  o.steps = std::move(steps);
  Rng rng(seed);
  augment(ex, o, rng, context);
  return ex;
}

void expect_box(const at::Tensor& boxes, int64_t i, std::vector<float> want, float tol = 1e-4f) {
  for (int64_t k = 0; k < 4; ++k)
    EXPECT_NEAR(boxes[i][k].item<float>(), want[static_cast<size_t>(k)], tol) << "box " << i << " coord " << k;
}

}  // namespace

// ---- the config list.

TEST(AugmentConfig, ListIsReadInOrderWithDefaultsFilledIn) {
  const std::string yaml = std::string(kConfig) +
                           "  augment:\n"
                           "    - random_horizontal_flip\n"
                           "    - random_crop_image: {min_object_covered: 0.5, probability: 0.8}\n"
                           "    - random_adjust_brightness:\n"
                           "    - ssd_random_crop: {min_object_covered: [0.1, 0.9], overlap_thresh: [0.2, 0.8]}\n";
  PipelineConfig c = parse_config(yaml, "configs/x.yaml");
  const auto& steps = c.train_input.augment.steps;
  // No sizing step given: the model's own (fixed resizer: resize_to_fit) is appended.
  EXPECT_EQ(names_of(steps), (std::vector<std::string>{"random_horizontal_flip", "random_crop_image",
                                                       "random_adjust_brightness", "ssd_random_crop",
                                                       "resize_to_fit"}));
  EXPECT_EQ(steps[0].probability, 0.5);  // the reference's flip chance
  EXPECT_EQ(steps[1].probability, 0.8);
  EXPECT_EQ(steps[1].number("min_object_covered"), 0.5);
  EXPECT_EQ(steps[1].numbers("aspect_ratio_range"), (std::vector<double>{0.75, 1.33}));  // preprocessor.py's defaults
  EXPECT_EQ(steps[1].number("overlap_thresh"), 0.3);
  EXPECT_TRUE(steps[1].flag("clip_boxes"));
  EXPECT_EQ(steps[2].number("max_delta"), 0.2);
  EXPECT_EQ(steps[3].numbers("overlap_thresh"), (std::vector<double>{0.2, 0.8}));
  EXPECT_EQ(steps[3].number("random_coef"), 0.15);
  EXPECT_EQ(steps[4].integer("size"), 0);  // the model's input size, filled in by the loader
  // The resolved config reads back to the same list.
  auto list_of = [](const PipelineConfig& p) {
    const std::string yaml = config_to_yaml(p);
    const size_t from = yaml.find("  augment:\n"), to = yaml.find("  num_workers:", from);
    return yaml.substr(from, to - from);
  };
  PipelineConfig again = parse_config(config_to_yaml(c), "configs/x.yaml");
  EXPECT_EQ(list_of(again), list_of(c));
  EXPECT_EQ(names_of(again.train_input.augment.steps), names_of(steps));
}

TEST(AugmentConfig, UnknownStepsAndParametersNameFileLineAndStep) {
  const std::string head = std::string(kConfig) + "  augment:\n    - random_horizontal_flip: {}\n";
  const std::string unknown = error_of(head + "    - random_flop: {}\n");
  EXPECT_EQ(unknown.rfind("configs/x.yaml:8: train_input.augment[1]: unknown augmentation step 'random_flop' (known: "
                          "random_horizontal_flip, random_vertical_flip, ",
                          0),
            0u)
      << unknown;
  EXPECT_EQ(error_of(head + "    - random_crop_image: {min_object_cover: 0.5}\n"),
            "configs/x.yaml:8: train_input.augment[1].random_crop_image.min_object_cover: unknown parameter of "
            "random_crop_image (known: probability, min_object_covered, aspect_ratio_range, area_range, "
            "overlap_thresh, clip_boxes, random_coef)");
  EXPECT_EQ(error_of(head + "    - random_crop_image:\n        overlap_thresh: 2\n"),
            "configs/x.yaml:9: train_input.augment[1].random_crop_image.overlap_thresh: expected a number in [0, 1], "
            "got \"2\"");
  EXPECT_EQ(error_of(head + "    - random_adjust_contrast: {min_delta: 2, max_delta: 1}\n"),
            "configs/x.yaml:8: train_input.augment[1] (random_adjust_contrast): min_delta (2) must not exceed "
            "max_delta (1)");
  EXPECT_EQ(error_of(head + "    - random_black_patches: {probability: 0.2, max_black_patches: 2.5}\n"),
            "configs/x.yaml:8: train_input.augment[1].random_black_patches.max_black_patches: expected an integer in "
            "[0, 1000], got \"2.5\"");
  EXPECT_EQ(error_of(head + "    - {random_adjust_hue: {}, random_adjust_saturation: {}}\n"),
            "configs/x.yaml:8: train_input.augment[1]: expected a step, `- name: {param: value, ...}` or `- name`, "
            "got a mapping of 2 keys");
  // A --set list names the --set.
  const std::string set = "train_input.augment=[{random_crop_image: {area_range: [0.5]}}]";
  EXPECT_EQ(error_of(kConfig, {set}),
            "--set " + set + ": train_input.augment[0].random_crop_image.area_range: expected a list of 2 numbers in "
            "[0.0001, 1]");
}

TEST(AugmentConfig, OlderKeysResolveToTheList) {
  // hflip + scale jitter on a fixed-resizer detector: today's flip then EfficientDet's jitter crop.
  PipelineConfig c = parse_config(std::string(kConfig) + "  hflip: true\n  scale_min: 0.8\n  scale_max: 1.2\n",
                                  "configs/x.yaml");
  const auto& steps = c.train_input.augment.steps;
  EXPECT_EQ(names_of(steps), (std::vector<std::string>{"random_horizontal_flip", "scale_jitter_crop"}));
  EXPECT_EQ(steps[1].number("scale_min"), 0.8);
  EXPECT_EQ(steps[1].number("scale_max"), 1.2);
  EXPECT_FALSE(c.train_input.hflip);  // said by the list now
  EXPECT_EQ(c.train_input.scale_min, 1.0);
  const std::string resolved = config_to_yaml(c);
  EXPECT_NE(resolved.find("    - random_horizontal_flip: {probability: 0.5}\n"), std::string::npos) << resolved;
  EXPECT_NE(resolved.find("    - scale_jitter_crop: {probability: 1, output_size: 0, scale_min: 0.8, scale_max: 1.2}\n"),
            std::string::npos)
      << resolved;
  // keep_aspect detectors get resize_min_max, DeepLab its scale-crop-pad with model.deeplab.scale_step.
  PipelineConfig k = parse_config(std::string(kConfig) + "  scale_min: 0.5\n  scale_max: 1.5\n", "configs/x.yaml",
                                  {"model.resizer=keep_aspect"});
  EXPECT_EQ(names_of(k.train_input.augment.steps), (std::vector<std::string>{"resize_min_max"}));
  EXPECT_EQ(k.train_input.augment.steps[0].number("scale_max"), 1.5);
  PipelineConfig d = parse_config(std::string(kConfig) + "  format: seg_folder\n  scale_min: 0.5\n  scale_max: 2.0\n",
                                  "configs/x.yaml", {"model.type=deeplabv3plus", "model.backbone=resnet18"});
  ASSERT_EQ(names_of(d.train_input.augment.steps), (std::vector<std::string>{"deeplab_scale_crop_pad"}));
  EXPECT_EQ(d.train_input.augment.steps[0].number("scale_step"), 0.25);
  // Both forms at once is refused.
  EXPECT_EQ(error_of(std::string(kConfig) + "  hflip: true\n  augment: [random_vertical_flip]\n"),
            "configs/x.yaml:7: train_input.augment replaces train_input.hflip, scale_min and scale_max: give the flip "
            "(random_horizontal_flip) and the scale range (the sizing step's scale_min/scale_max) in the list");
}

// A list given over a _base_ that used the older keys (the demo recipes set hflip) replaces them; a
// --set list replaces the file's; the two forms written at one level stay an error.
TEST(AugmentConfig, AListOverABaseReplacesItsOlderKeys) {
  const detseg::testing::TempDir dir("augment_base");
  const fs::path base = dir.path() / "base.yaml", child = dir.path() / "child.yaml";
  std::ofstream(base) << kConfig << "  hflip: true\n  scale_min: 0.5\n  scale_max: 1.5\n";
  std::ofstream(child) << "_base_: base.yaml\ntrain_input:\n  augment: [random_vertical_flip]\n";
  PipelineConfig c = load_config(child.string());
  EXPECT_EQ(names_of(c.train_input.augment.steps), (std::vector<std::string>{"random_vertical_flip", "resize_to_fit"}));
  // Without the list the base's keys hold.
  std::ofstream(child) << "_base_: base.yaml\n";
  EXPECT_EQ(names_of(load_config(child.string()).train_input.augment.steps),
            (std::vector<std::string>{"random_horizontal_flip", "scale_jitter_crop"}));
  // --set over the file: the base's own keys give way to it too.
  c = load_config(base.string(), {"train_input.augment=[random_rotation90]"});
  EXPECT_EQ(names_of(c.train_input.augment.steps), (std::vector<std::string>{"random_rotation90", "resize_to_fit"}));
  // The child writing both, or --set giving both: refused.
  std::ofstream(child) << "_base_: base.yaml\ntrain_input:\n  hflip: true\n  augment: [random_vertical_flip]\n";
  try {
    load_config(child.string());
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(child.string() + ":4: train_input.augment replaces train_input.hflip", 0), 0u)
        << e.what();
  }
  EXPECT_THROW(load_config(base.string(), {"train_input.augment=[random_rotation90]", "train_input.hflip=true"}),
               ConfigError);
}

TEST(AugmentConfig, StepsRefusedWhereTheModelLacksWhatTheyMix) {
  EXPECT_EQ(error_of(std::string(kConfig) + "  augment: [copy_paste]\n"),
            "configs/x.yaml:6: train_input.augment: copy_paste pastes instance masks; retinanet has none (mask_rcnn "
            "has)");
  EXPECT_EQ(error_of(std::string(kConfig) + "eval_input:\n  augment: [random_vertical_flip]\n"),
            "configs/x.yaml:7: eval_input.augment: augmentation is for train_input; evaluation images get the "
            "model's resize only");
  EXPECT_EQ(error_of(std::string(kConfig) + "  format: seg_folder\n  augment: [mixup]\n", {"model.type=deeplabv3plus",
                                                                                            "model.backbone=resnet18"}),
            "configs/x.yaml:7: train_input.augment: mixup mixes boxes; deeplabv3plus trains on label maps");
}

// ---- steps through the pipeline.

TEST(AugmentSteps, ProbabilityGatesEachStepWithOneDraw) {
  Example ex = synthetic_example(10, 20, {{1, 2, 5, 6}});
  AugmentStep flip = always("random_horizontal_flip");
  flip.probability = 0;
  EXPECT_TRUE(run_steps(ex, {flip}, 1).image.equal(ex.image));
  flip.probability = 1;
  expect_box(run_steps(ex, {flip}, 1).boxes, 0, {15, 2, 19, 6});
  // At 0.5 the decision is the older random_hflip's for the same stream: configs keep their batches.
  flip.probability = 0.5;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    Example legacy = ex;
    Rng rng(seed);
    const bool flipped = random_hflip(legacy, rng, 0.5);
    EXPECT_EQ(run_steps(ex, {flip}, seed).geometry.flipped(), flipped) << seed;
  }
}

// A copy of an Example shares its pixels: colour steps, which write in place, must not change the
// caller's (a mixing step's source, a test's input).
TEST(AugmentSteps, ColourStepsLeaveTheCallersImageAlone) {
  const Example ex = synthetic_example(10, 20);
  const at::Tensor before = ex.image.clone();
  for (const char* name : {"random_adjust_brightness", "random_distort_color", "random_rgb_to_gray",
                           "random_pixel_value_scale", "random_black_patches", "random_patch_gaussian",
                           "autoaugment_image"}) {
    AugmentStep step = always(name);
    if (std::string(name) == "random_black_patches") step.set("probability", 1).set("size_to_image_ratio", 0.5);
    // v0's draw from this seed picks a sub-policy that leaves this image as it is; v1's changes it.
    if (std::string(name) == "autoaugment_image") step.set_text("policy_name", "v1");
    const Example out = run_steps(ex, {step}, 3);
    EXPECT_TRUE(ex.image.equal(before)) << name;
    EXPECT_FALSE(out.image.equal(before)) << name;
  }
}

TEST(AugmentSteps, WorkedValuesThroughTheRunner) {
  // random_image_scale at 0.5: each side floor(side x 0.5).
  Example ex = synthetic_example(50, 101, {{10, 20, 30, 40}});
  Example scaled = run_steps(ex, {always("random_image_scale").set("min_scale_ratio", 0.5).set("max_scale_ratio", 0.5)}, 1);
  EXPECT_EQ(scaled.height(), 25);
  EXPECT_EQ(scaled.width(), 50);
  expect_box(scaled.boxes, 0, {10 * 50.f / 101, 10, 30 * 50.f / 101, 20});
  // random_black_patches: one try, certain, side 0.5 x 20 = 10.
  Example grey = synthetic_example(20, 30);
  grey.image.fill_(200);
  Example patched = run_steps(grey, {always("random_black_patches")
                                         .set("max_black_patches", 1)
                                         .set("probability", 1)
                                         .set("size_to_image_ratio", 0.5)},
                              3);
  EXPECT_EQ(patched.image.eq(0).sum().item<int64_t>(), 3 * 100);
  // random_pad_image to exactly 30 x 40 (offsets y < 10, x < 10), padding (9, 8, 7).
  Example padded = run_steps(synthetic_example(20, 30, {{1, 1, 5, 5}}),
                             {always("random_pad_image")
                                  .set("min_image_height", 30)
                                  .set("max_image_height", 30)
                                  .set("min_image_width", 40)
                                  .set("max_image_width", 40)
                                  .set_numbers("pad_color", {9, 8, 7})},
                             5);
  EXPECT_EQ(padded.height(), 30);
  EXPECT_EQ(padded.width(), 40);
  const float ox = static_cast<float>(padded.geometry.offset_x), oy = static_cast<float>(padded.geometry.offset_y);
  EXPECT_GE(ox, 0);
  EXPECT_LT(ox, 10);
  expect_box(padded.boxes, 0, {1 + ox, 1 + oy, 5 + ox, 5 + oy});
  for (int c = 0; c < 3; ++c) EXPECT_EQ(padded.image[c][29][39].item<int>(), 9 - c);  // always padding
  // random_crop_pad_image: a whole-image crop (area and aspect 1), then padding to 1.5 x the size.
  Example cp = run_steps(synthetic_example(20, 20, {{2, 2, 8, 8}}),
                         {always("random_crop_pad_image")
                              .set_numbers("area_range", {1, 1})
                              .set_numbers("aspect_ratio_range", {1, 1})
                              .set_numbers("min_padded_size_ratio", {1.5, 1.5})
                              .set_numbers("max_padded_size_ratio", {1.5, 1.5})},
                         7);
  EXPECT_EQ(cp.height(), 30);
  EXPECT_EQ(cp.width(), 30);
  // ssd_random_crop with one operation that must keep the whole box of the whole image.
  Example whole = run_steps(synthetic_example(30, 40, {{0, 0, 40, 30}}),
                            {always("ssd_random_crop")
                                 .set_numbers("min_object_covered", {1.0})
                                 .set_numbers("overlap_thresh", {1.0})
                                 .set("random_coef", 0)},
                            9);
  EXPECT_EQ(whole.height(), 30);
  EXPECT_EQ(whole.width(), 40);
  // random_jpeg_quality at exactly 50 is one JPEG round trip at 50.
  Example jpeg = synthetic_example(24, 32);
  at::Tensor expected = jpeg.image.clone();
  jpeg_round_trip(expected, 50);
  EXPECT_TRUE(run_steps(jpeg, {always("random_jpeg_quality").set("min_jpeg_quality", 50).set("max_jpeg_quality", 50)}, 2)
                  .image.equal(expected));
}

TEST(AugmentSteps, LargeScaleJitterScalesTheLongerSideCropsAndPads) {
  // 200 x 400 at scale 0.5 to a 100 square: longer side 400 -> 50, so 25 x 50, no crop, canvas 100.
  Example ex = synthetic_example(200, 400, {{40, 20, 120, 100}});
  AugmentStep lsj = always("random_scale_crop_and_pad_to_square").set("output_size", 100).set("scale_min", 0.5)
                        .set("scale_max", 0.5);
  Example small = run_steps(ex, {lsj}, 1);
  EXPECT_EQ(small.height(), 25);
  EXPECT_EQ(small.width(), 50);
  EXPECT_EQ(small.canvas_height, 100);
  EXPECT_EQ(small.canvas_width, 100);
  expect_box(small.boxes, 0, {5, 2.5, 15, 12.5});
  // At scale 2: 100 x 200, a random 100 square crop along x: box [20, 10, 60, 50] - offset.
  lsj.set("scale_min", 2.0).set("scale_max", 2.0);
  for (uint64_t seed = 0; seed < 5; ++seed) {
    Example big = run_steps(ex, {lsj}, seed);
    EXPECT_EQ(big.height(), 100);
    EXPECT_EQ(big.width(), 100);
    const float ox = -static_cast<float>(big.geometry.offset_x);
    EXPECT_GE(ox, 0);
    EXPECT_LE(ox, 100);
    if (ox < 60) expect_box(big.boxes, 0, {std::max(0.f, 20 - ox), 10, std::min(100.f, 60 - ox), 50});
    else EXPECT_EQ(big.num_boxes(), 0);
  }
}

TEST(AugmentSteps, MosaicStopsForTheLastSteps) {
  Rng pool(21);
  AugmentContext context;
  context.draw_example = [](Rng& rng) { return random_example(rng, 99); };
  AugmentOptions o;
  o.resize = AugmentOptions::Resize::kNone;
  o.steps = {always("mosaic").set("off_last_steps", 10)};
  o.total_steps = 100;
  Example ex = random_example(pool, 1);
  for (int64_t step : {89, 90, 99}) {
    Example e = ex;
    context.step = step;
    Rng rng(4);
    augment(e, o, rng, context);
    if (step < 90) {
      EXPECT_EQ(e.height(), 64);
      EXPECT_EQ(e.width(), 64);
    } else {
      EXPECT_TRUE(e.image.equal(ex.image)) << "mosaic at step " << step;
    }
  }
}

// Every step on random images: boxes stay inside the image and agree with their masks' extents
// (1 px), the per-instance fields keep one entry per box, label maps keep the image's size.
TEST(AugmentSteps, EveryStepKeepsBoxesInsideAndOnTheirMasks) {
  AugmentContext context;
  context.draw_example = [](Rng& rng) { return random_example(rng, 99); };
  for (const AugmentStepInfo& info : augment_steps()) {
    for (uint64_t seed = 0; seed < 12; ++seed) {
      Rng pool(1000 + seed);
      Example ex = random_example(pool, static_cast<int64_t>(seed));
      const int64_t before = ex.num_boxes() + ex.dropped_boxes;
      Example out = run_steps(ex, {always(info.name)}, seed, context);
      const std::string where = info.name + " seed " + std::to_string(seed);
      ASSERT_EQ(out.image.dim(), 3) << where;
      ASSERT_EQ(out.image.scalar_type(), at::kByte) << where;
      const int64_t h = out.height(), w = out.width(), n = out.num_boxes();
      ASSERT_EQ(out.masks.size(0), n) << where;
      ASSERT_EQ(out.masks.size(1), h) << where;
      ASSERT_EQ(out.masks.size(2), w) << where;
      ASSERT_EQ(out.classes.size(0), n) << where;
      ASSERT_EQ(out.iscrowd.size(0), n) << where;
      ASSERT_EQ(out.label_map.sizes(), (at::IntArrayRef{h, w})) << where;
      if (!info.needs_boxes && !info.needs_masks && info.name != "mosaic") {
        EXPECT_EQ(n + out.dropped_boxes, before) << where << ": every box kept or counted";
      }
      for (int64_t i = 0; i < n; ++i) {
        const float x1 = out.boxes[i][0].item<float>(), y1 = out.boxes[i][1].item<float>();
        const float x2 = out.boxes[i][2].item<float>(), y2 = out.boxes[i][3].item<float>();
        EXPECT_TRUE(x1 >= 0 && y1 >= 0 && x2 <= w + 1e-3 && y2 <= h + 1e-3 && x2 > x1 && y2 > y1)
            << where << " box " << i << " [" << x1 << ", " << y1 << ", " << x2 << ", " << y2 << "] in " << w << "x" << h;
        // By design: jitter moves boxes, not pixels; autoaugment_image's *_Only_BBoxes operations move
        // pixels and masks inside a box, not the box (test_autoaugment.cpp checks its masks).
        if (info.name == "random_jitter_boxes" || info.name == "autoaugment_image") continue;
        const at::Tensor m = out.masks[i] > 0;
        if (!m.any().item<bool>()) {
          EXPECT_TRUE(x2 - x1 < 2 || y2 - y1 < 2) << where << " box " << i << " has no mask pixels";
          continue;
        }
        const at::Tensor rows = m.any(1).nonzero(), cols = m.any(0).nonzero();
        EXPECT_NEAR(x1, cols.min().item<int64_t>(), 1.0) << where << " box " << i;
        EXPECT_NEAR(x2, cols.max().item<int64_t>() + 1, 1.0) << where << " box " << i;
        EXPECT_NEAR(y1, rows.min().item<int64_t>(), 1.0) << where << " box " << i;
        EXPECT_NEAR(y2, rows.max().item<int64_t>() + 1, 1.0) << where << " box " << i;
      }
    }
  }
}

// ---- the loader.

namespace {

Example loader_example(int64_t i) {
  Rng rng(static_cast<uint64_t>(500 + i));
  return random_example(rng, 1000 + i);
}

LoaderOptions mixing_options(int workers) {
  LoaderOptions o;
  o.batch_size = 3;
  o.num_workers = workers;
  o.seed = 17;
  o.epochs = 2;
  o.augment.resize = AugmentOptions::Resize::kKeepAspect;
  o.augment.out_h = o.augment.out_w = 64;
  o.augment.steps = {always("mosaic"), always("mixup"), always("copy_paste"), always("random_distort_color"),
                     always("random_crop_image"), always("random_horizontal_flip")};
  o.augment.steps.back().probability = 0.5;
  o.augment.total_steps = 8;
  return o;
}

std::vector<Batch> drain(Loader& loader) {
  std::vector<Batch> out;
  Batch b;
  while (loader.next(b)) out.push_back(b);
  return out;
}

void expect_same_batches(const std::vector<Batch>& a, const std::vector<Batch>& b, size_t offset = 0) {
  ASSERT_EQ(a.size(), b.size() + offset);
  for (size_t k = 0; k < b.size(); ++k) {
    EXPECT_TRUE(a[k + offset].images.equal(b[k].images)) << "batch " << k + offset;
    EXPECT_TRUE(a[k + offset].boxes.equal(b[k].boxes)) << "batch " << k + offset;
    EXPECT_TRUE(a[k + offset].masks.equal(b[k].masks)) << "batch " << k + offset;
    EXPECT_EQ(a[k + offset].image_ids, b[k].image_ids);
  }
}

}  // namespace

TEST(AugmentLoader, MixingStepsGiveTheSameBatchesWhateverTheWorkersAndOnResume) {
  const int64_t n = 7;
  Loader serial(n, loader_example, mixing_options(0));
  const std::vector<Batch> want = drain(serial);
  ASSERT_EQ(want.size(), 6u);
  // Mosaic, mixup and copy-paste brought other images' boxes in.
  LoaderOptions plain_options = mixing_options(0);
  plain_options.augment.steps.erase(plain_options.augment.steps.begin(), plain_options.augment.steps.begin() + 3);
  Loader plain(n, loader_example, plain_options);
  auto count = [](const std::vector<Batch>& batches) {
    int64_t boxes = 0;
    for (const Batch& b : batches) boxes += b.num_boxes.sum().item<int64_t>();
    return boxes;
  };
  EXPECT_GT(count(want), count(drain(plain)) + 10);
  for (int workers : {1, 3}) {
    Loader threaded(n, loader_example, mixing_options(workers));
    expect_same_batches(want, drain(threaded));
  }
  // Resumed at batch 4 (a checkpoint at step 4): the batches an uninterrupted run gives from there.
  LoaderOptions resumed = mixing_options(2);
  resumed.start_batch = 4;
  Loader later(n, loader_example, resumed);
  expect_same_batches(want, drain(later), 4);
  // Mosaic's off_last_steps counts the batch number: with the last 4 of 8 steps off, batches 4-5
  // change and 0-3 do not.
  LoaderOptions closing = mixing_options(0);
  closing.augment.steps[0].set("off_last_steps", 4);
  Loader closed(n, loader_example, closing);
  const std::vector<Batch> got = drain(closed);
  EXPECT_TRUE(got[3].images.equal(want[3].images));
  EXPECT_FALSE(got[4].images.equal(want[4].images));
}

TEST(AugmentLoader, OlderConfigsKeepTheirBatches) {
  // hflip + scale jitter through the list gives the batches the older fields gave, bit for bit.
  PipelineConfig c = parse_config(std::string(kConfig) + "  hflip: true\n  scale_min: 0.8\n  scale_max: 1.2\n",
                                  "configs/x.yaml");
  LoaderOptions listed = make_loader_options(c, c.train_input, /*training=*/true, 3, 64);
  EXPECT_EQ(listed.augment.resize, AugmentOptions::Resize::kScaleJitter);
  EXPECT_EQ(listed.augment.out_h, 64);
  ASSERT_EQ(names_of(listed.augment.steps), (std::vector<std::string>{"random_horizontal_flip"}));
  LoaderOptions older = listed;
  older.augment.steps.clear();
  older.augment.random_flip = true;
  for (LoaderOptions* o : {&listed, &older}) {
    o->epochs = 2;
    o->num_workers = 0;
  }
  Loader a(7, loader_example, listed), b(7, loader_example, older);
  expect_same_batches(drain(a), drain(b));
  // Evaluation never augments.
  LoaderOptions eval = make_loader_options(c, c.train_input, /*training=*/false, 1, 64);
  EXPECT_TRUE(eval.augment.steps.empty());
  EXPECT_EQ(eval.augment.resize, AugmentOptions::Resize::kKeepAspect);
}

namespace {

// make_loader_options as it was before train_input.augment existed (hflip, scale_min/max and the
// model's resizer read directly): the reference the resolved lists must reproduce bit for bit.
LoaderOptions legacy_loader_options(const PipelineConfig& config, const InputConfig& input, bool training,
                                    int64_t batch_size, int64_t input_size) {
  LoaderOptions o = make_loader_options(config, input, training, batch_size, input_size);  // the unchanged fields
  o.augment = AugmentOptions{};
  o.augment.out_h = input_size;
  o.augment.out_w = input_size;
  o.augment.random_flip = training && input.hflip;
  const bool jitter = training && (input.scale_min != 1.0 || input.scale_max != 1.0);
  o.augment.resize = jitter ? AugmentOptions::Resize::kScaleJitter : AugmentOptions::Resize::kKeepAspect;
  o.augment.jitter.min_scale = input.scale_min;
  o.augment.jitter.max_scale = input.scale_max;
  if (config.model.resizer == "keep_aspect") {
    o.augment.resize = AugmentOptions::Resize::kMinMax;
    o.augment.min_max.min_dimension = static_cast<double>(config.model.min_dimension);
    o.augment.min_max.max_dimension = static_cast<double>(config.model.max_dimension);
    o.augment.min_max.min_scale = training ? input.scale_min : 1.0;
    o.augment.min_max.max_scale = training ? input.scale_max : 1.0;
  }
  const ModelTypeInfo* type = find_model_type(config.model.type);
  if (type && type->kind == "segmenter") {
    o.augment.resize = training ? AugmentOptions::Resize::kDeepLab : AugmentOptions::Resize::kNone;
    o.augment.deeplab.min_scale = input.scale_min;
    o.augment.deeplab.max_scale = input.scale_max;
    o.augment.deeplab.scale_step = config.model.deeplab.scale_step;
    o.augment.deeplab.ignore_label = 255;
    for (int c = 0; c < 3; ++c)
      o.augment.deeplab.image_fill[c] = static_cast<uint8_t>(std::lround(config.model.pixel_mean[c] * 255.0));
  }
  return o;
}

// The older keys as the YAML gave them, before resolve_augment_lists folded them into the list.
InputConfig older_keys_of(const std::string& yaml) {
  InputConfig input;
  const YAML::Node root = YAML::Load(yaml)["train_input"];
  if (root && root["hflip"]) input.hflip = root["hflip"].as<bool>();
  if (root && root["scale_min"]) input.scale_min = root["scale_min"].as<double>();
  if (root && root["scale_max"]) input.scale_max = root["scale_max"].as<double>();
  return input;
}

void expect_identical_batches(const std::vector<Batch>& a, const std::vector<Batch>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_TRUE(a[k].images.equal(b[k].images)) << what << " batch " << k;
    EXPECT_TRUE(a[k].image_sizes.equal(b[k].image_sizes)) << what << " batch " << k;
    EXPECT_TRUE(a[k].boxes.equal(b[k].boxes)) << what << " batch " << k;
    EXPECT_TRUE(a[k].classes.equal(b[k].classes)) << what << " batch " << k;
    EXPECT_EQ(a[k].masks.defined(), b[k].masks.defined()) << what;
    if (a[k].masks.defined()) {
      EXPECT_TRUE(a[k].masks.equal(b[k].masks)) << what << " batch " << k;
    }
    EXPECT_EQ(a[k].label_maps.defined(), b[k].label_maps.defined()) << what;
    if (a[k].label_maps.defined()) {
      EXPECT_TRUE(a[k].label_maps.equal(b[k].label_maps)) << what << " batch " << k;
    }
    for (size_t i = 0; i < a[k].geometries.size(); ++i) {
      EXPECT_EQ(a[k].geometries[i].scale_x, b[k].geometries[i].scale_x) << what << " batch " << k;
      EXPECT_EQ(a[k].geometries[i].offset_x, b[k].geometries[i].offset_x) << what << " batch " << k;
      EXPECT_EQ(a[k].geometries[i].offset_y, b[k].geometries[i].offset_y) << what << " batch " << k;
    }
  }
}

}  // namespace

// Every shipped config (the demos, the learning tests' fixtures, the learning benchmark) and the
// older keys' combinations on each resizer: the list resolved from hflip / scale_min / scale_max
// gives the loader the batches the older fields gave, bit for bit, in training and evaluation.
TEST(AugmentLoader, EveryConfigWithoutAListTrainsOnTheOlderBatches) {
  std::vector<std::pair<std::string, std::string>> configs;  // (name, yaml)
  for (const char* dir : {"configs/demo", "tests/fixtures/learning", "bench/configs"})
    for (const auto& entry : fs::directory_iterator(fs::path(DETSEG_SOURCE_DIR) / dir)) {
      if (entry.path().extension() != ".yaml") continue;
      std::ifstream in(entry.path());
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (text.find("\n  augment:") != std::string::npos) continue;  // has a list of its own
      configs.emplace_back(entry.path().string(), "");
    }
  std::sort(configs.begin(), configs.end());
  ASSERT_GE(configs.size(), 8u);
  const std::string input = "train_input:\n  annotations: data/train.json\n";
  for (const char* resizer : {"fixed", "keep_aspect"})
    for (const char* keys : {"", "  hflip: true\n", "  scale_min: 0.5\n  scale_max: 1.5\n",
                             "  hflip: true\n  scale_min: 0.8\n  scale_max: 1.2\n"})
      configs.emplace_back(std::string(resizer) + " + {" + keys + "}",
                           "model:\n  num_classes: 3\n  image_size: 64\n  resizer: " + std::string(resizer) + "\n" +
                               input + keys);
  for (const char* keys : {"", "  hflip: true\n  scale_min: 0.5\n  scale_max: 2.0\n"})
    configs.emplace_back(std::string("deeplab + {") + keys + "}",
                         "model:\n  type: deeplabv3plus\n  backbone: resnet18\n  num_classes: 3\n" + input +
                             "  format: seg_folder\n" + keys);
  int compared = 0, flipped = 0;
  for (const auto& [name, inline_yaml] : configs) {
    std::string yaml = inline_yaml;
    if (yaml.empty()) {
      std::ifstream in(name);
      yaml.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    // A _base_ fragment's own keys are read by its base's reader; merged here through load_config.
    PipelineConfig c = inline_yaml.empty() ? load_config(name) : parse_config(yaml, "configs/x.yaml");
    // Small sizes keep the comparison quick; both paths read them from the same config.
    c.model.min_dimension = 48;
    c.model.max_dimension = 80;
    c.model.image_size = 64;
    c.train.seed = 5;
    InputConfig older = c.train_input;
    const InputConfig keys = older_keys_of(yaml);
    if (inline_yaml.empty() && yaml.find("_base_") != std::string::npos) {
      // The older keys come from the base file.
      const std::string base = (fs::path(name).parent_path() /
                                YAML::Load(yaml)["_base_"].as<std::string>()).string();
      std::ifstream in(base);
      const InputConfig from_base =
          older_keys_of(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
      older.hflip = from_base.hflip, older.scale_min = from_base.scale_min, older.scale_max = from_base.scale_max;
    } else {
      older.hflip = keys.hflip, older.scale_min = keys.scale_min, older.scale_max = keys.scale_max;
    }
    flipped += older.hflip ? 1 : 0;
    for (bool training : {true, false}) {
      LoaderOptions now = make_loader_options(c, c.train_input, training, 3, 64);
      LoaderOptions before = legacy_loader_options(c, older, training, 3, 64);
      EXPECT_FALSE(now.augment.random_flip) << name;  // the flip, when asked for, is the list's first step
      EXPECT_EQ(now.augment.steps.size(), training && older.hflip ? 1u : 0u) << name;
      for (LoaderOptions* o : {&now, &before}) {
        o->epochs = 2;
        o->num_workers = 0;
      }
      Loader a(7, loader_example, now), b(7, loader_example, before);
      expect_identical_batches(drain(a), drain(b), name + (training ? " (training)" : " (evaluation)"));
      ++compared;
    }
  }
  EXPECT_EQ(compared, 2 * static_cast<int>(configs.size()));
  EXPECT_GE(flipped, 8);  // the flip path is exercised, not only the resize
}
