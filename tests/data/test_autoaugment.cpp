// Implements: tests of autoaugment_image (EfficientDet's AutoAugment for detection): the policies'
// tables and level -> argument values, each operation on hand-made images with hand-computed pixels
// and boxes, the box-only operations staying inside their boxes, masks and label maps moving with
// the pixels, determinism, every policy on images with boxes and masks, and the config's refusals.
#include <gtest/gtest.h>

#include <set>

#include "data_test_util.h"
#include "detseg/config/augment_steps.h"
#include "detseg/config/config.h"
#include "detseg/data/transforms/autoaugment.h"
#include "detseg/data/transforms/geometry.h"

using namespace detseg;
using detseg::datatest::synthetic_example;

namespace {

// The operations no policy v0-v3 uses, which the reference still defines.
const std::vector<std::string> kUnusedOps = {"Rotate_Only_BBoxes", "TranslateX_Only_BBoxes", "Solarize_Only_BBoxes"};

std::set<std::string> ops_of_policies() {
  std::set<std::string> names;
  for (const std::string& policy : autoaugment_policy_names())
    for (const AutoAugmentSubPolicy& sub : autoaugment_policy(policy))
      for (const AutoAugmentOp& op : sub) names.insert(op.name);
  return names;
}

// An h x w synthetic example with integer boxes {x1, y1, x2, y2}, a mask filling each box and a
// label map of 1 inside the boxes, 0 elsewhere.
Example boxed_example(int64_t h, int64_t w, const std::vector<std::array<int64_t, 4>>& boxes) {
  std::vector<std::vector<float>> float_boxes;
  for (const auto& b : boxes) float_boxes.push_back({float(b[0]), float(b[1]), float(b[2]), float(b[3])});
  Example ex = synthetic_example(h, w, float_boxes);
  ex.masks = at::zeros({static_cast<int64_t>(boxes.size()), h, w}, at::kByte);
  ex.label_map = at::zeros({h, w}, at::kByte);
  for (size_t i = 0; i < boxes.size(); ++i) {
    const auto& b = boxes[i];
    ex.masks[static_cast<int64_t>(i)].slice(0, b[1], b[3]).slice(1, b[0], b[2]).fill_(1);
    ex.label_map.slice(0, b[1], b[3]).slice(1, b[0], b[2]).fill_(1);
  }
  return ex;
}

// Runs one operation with its argument; box-only operations treat every box.
Example apply_op(Example ex, const std::string& op, double argument, uint64_t seed = 1) {
  ex.image = ex.image.clone();
  Rng rng(seed);
  apply_autoaugment_op(ex, op, argument, 1.0, rng);
  return ex;
}

void expect_box(const Example& ex, int64_t i, std::array<double, 4> want, double tol = 1e-4) {
  ASSERT_LT(i, ex.num_boxes());
  for (int64_t k = 0; k < 4; ++k)
    EXPECT_NEAR(ex.boxes[i][k].item<double>(), want[static_cast<size_t>(k)], tol) << "box " << i << " coord " << k;
}

// A 1 x n image with the same value in the three channels.
at::Tensor grey_row(const std::vector<int>& values) {
  at::Tensor row = at::tensor(std::vector<int64_t>(values.begin(), values.end())).to(at::kByte);
  return row.view({1, 1, -1}).expand({3, 1, row.numel()}).contiguous();
}

std::vector<int> channel_row(const at::Tensor& image, int64_t c = 0) {
  const at::Tensor row = image[c].reshape({-1}).to(at::kInt);
  return std::vector<int>(row.data_ptr<int>(), row.data_ptr<int>() + row.numel());
}

Example image_only(at::Tensor image) {
  Example ex;
  ex.image = std::move(image);
  ex.boxes = at::zeros({0, 4}, at::kFloat);
  return ex;
}

// Pixels outside every box are unchanged.
void expect_outside_boxes_unchanged(const Example& before, const Example& after, const std::string& what) {
  at::Tensor outside = at::ones({before.height(), before.width()}, at::kBool);
  for (int64_t i = 0; i < before.num_boxes(); ++i) {
    const auto b = before.boxes[i].to(at::kLong);
    outside.slice(0, b[1].item<int64_t>(), b[3].item<int64_t>()).slice(1, b[0].item<int64_t>(), b[2].item<int64_t>()).fill_(false);
  }
  const at::Tensor same = (before.image == after.image).all(0);
  EXPECT_TRUE(same.masked_select(outside).all().item<bool>()) << what << " changed pixels outside the boxes";
}

// Every mask pixel lies inside its box (1 px).
void expect_masks_inside_boxes(const Example& ex, const std::string& what) {
  ASSERT_EQ(ex.masks.size(0), ex.num_boxes()) << what;
  for (int64_t i = 0; i < ex.num_boxes(); ++i) {
    const at::Tensor m = ex.masks[i] > 0;
    if (!m.any().item<bool>()) continue;
    const at::Tensor rows = m.any(1).nonzero(), cols = m.any(0).nonzero();
    const auto b = ex.boxes[i];
    EXPECT_GE(cols.min().item<int64_t>(), b[0].item<float>() - 1) << what << " box " << i;
    EXPECT_LE(cols.max().item<int64_t>() + 1, b[2].item<float>() + 1) << what << " box " << i;
    EXPECT_GE(rows.min().item<int64_t>(), b[1].item<float>() - 1) << what << " box " << i;
    EXPECT_LE(rows.max().item<int64_t>() + 1, b[3].item<float>() + 1) << what << " box " << i;
  }
}

}  // namespace

// ---- the tables.

TEST(AutoAugmentPolicy, TablesAreTheReferences) {
  EXPECT_EQ(autoaugment_policy_names(), (std::vector<std::string>{"v0", "v1", "v2", "v3"}));
  EXPECT_EQ(autoaugment_policy("v0").size(), 5u);
  EXPECT_EQ(autoaugment_policy("v1").size(), 20u);
  EXPECT_EQ(autoaugment_policy("v2").size(), 15u);
  EXPECT_EQ(autoaugment_policy("v3").size(), 15u);
  // v1 starts with v0's five sub-policies.
  for (size_t i = 0; i < 5; ++i)
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_STREQ(autoaugment_policy("v1")[i][k].name, autoaugment_policy("v0")[i][k].name);
      EXPECT_EQ(autoaugment_policy("v1")[i][k].level, autoaugment_policy("v0")[i][k].level);
    }
  const AutoAugmentOp& rotate = autoaugment_policy("v0")[4][0];
  EXPECT_STREQ(rotate.name, "Rotate_BBox");
  EXPECT_EQ(rotate.probability, 0.6);
  EXPECT_EQ(rotate.level, 10);
  EXPECT_STREQ(autoaugment_policy("v2")[10][1].name, "BBox_Cutout");
  EXPECT_EQ(autoaugment_policy("v2")[10].size(), 3u);
  EXPECT_STREQ(autoaugment_policy("v3")[0][0].name, "Posterize");
  EXPECT_EQ(autoaugment_policy("v3")[0][0].probability, 0.8);
  // Every operation the policies name is known, and the three only the reference's table has.
  const std::set<std::string> used = ops_of_policies();
  EXPECT_EQ(used.size(), 22u);
  for (const std::string& op : used) EXPECT_NO_THROW(autoaugment_level_to_arg(op, 5)) << op;
  for (const std::string& op : kUnusedOps) {
    EXPECT_EQ(used.count(op), 0u) << op;
    EXPECT_NO_THROW(autoaugment_level_to_arg(op, 5)) << op;
  }
  try {
    autoaugment_policy("v4");
    ADD_FAILURE() << "v4 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("autoaugment_image.policy_name: unknown policy 'v4'"), std::string::npos)
        << e.what();
  }
}

TEST(AutoAugmentPolicy, LevelToArgumentIsTheReferences) {
  EXPECT_DOUBLE_EQ(autoaugment_level_to_arg("Rotate_BBox", 10), 30.0);
  EXPECT_DOUBLE_EQ(autoaugment_level_to_arg("Rotate_BBox", 8), 24.0);
  EXPECT_DOUBLE_EQ(autoaugment_level_to_arg("Rotate_Only_BBoxes", 6), 18.0);
  EXPECT_DOUBLE_EQ(autoaugment_level_to_arg("TranslateX_BBox", 4), 100.0);
  EXPECT_DOUBLE_EQ(autoaugment_level_to_arg("TranslateY_BBox", 8), 200.0);
  EXPECT_DOUBLE_EQ(autoaugment_level_to_arg("TranslateY_Only_BBoxes", 6), 72.0);
  EXPECT_DOUBLE_EQ(autoaugment_level_to_arg("TranslateY_Only_BBoxes", 2), 24.0);
  EXPECT_DOUBLE_EQ(autoaugment_level_to_arg("ShearX_BBox", 2), 0.06);
  EXPECT_DOUBLE_EQ(autoaugment_level_to_arg("ShearY_BBox", 10), 0.3);
  EXPECT_DOUBLE_EQ(autoaugment_level_to_arg("ShearX_BBox", 0), 0.0);
  EXPECT_DOUBLE_EQ(autoaugment_level_to_arg("Color", 6), 1.18);
  EXPECT_DOUBLE_EQ(autoaugment_level_to_arg("Sharpness", 0), 0.1);
  EXPECT_DOUBLE_EQ(autoaugment_level_to_arg("Brightness", 10), 1.9);
  EXPECT_EQ(autoaugment_level_to_arg("Solarize", 8), 204);      // int(204.8)
  EXPECT_EQ(autoaugment_level_to_arg("Solarize", 6), 153);      // int(153.6)
  EXPECT_EQ(autoaugment_level_to_arg("SolarizeAdd", 4), 44);
  EXPECT_EQ(autoaugment_level_to_arg("SolarizeAdd", 6), 66);
  EXPECT_EQ(autoaugment_level_to_arg("Posterize", 2), 0);       // int(0.8)
  EXPECT_EQ(autoaugment_level_to_arg("Posterize", 6), 2);       // int(2.4)
  EXPECT_EQ(autoaugment_level_to_arg("Cutout", 8), 80);
  EXPECT_EQ(autoaugment_level_to_arg("Cutout_Only_BBoxes", 6), 30);
  EXPECT_DOUBLE_EQ(autoaugment_level_to_arg("BBox_Cutout", 4), 0.3);
  EXPECT_DOUBLE_EQ(autoaugment_level_to_arg("BBox_Cutout", 10), 0.75);
  EXPECT_EQ(autoaugment_level_to_arg("Equalize", 10), 0);
  EXPECT_EQ(autoaugment_level_to_arg("Flip_Only_BBoxes", 10), 0);
  for (const char* op : {"Rotate_BBox", "ShearY_BBox", "TranslateX_BBox", "ShearX_Only_BBoxes", "TranslateY_Only_BBoxes"})
    EXPECT_TRUE(autoaugment_random_sign(op)) << op;
  for (const char* op : {"Color", "Cutout", "BBox_Cutout", "Solarize", "Flip_Only_BBoxes", "Equalize_Only_BBoxes"})
    EXPECT_FALSE(autoaugment_random_sign(op)) << op;
  EXPECT_THROW(autoaugment_level_to_arg("Invert", 5), Error);
}

// ---- the pixel operations, by hand.

TEST(AutoAugmentOps, PointOperationsGiveHandComputedPixels) {
  // Solarize 128: values from 128 up become 255 - value.
  EXPECT_EQ(channel_row(apply_op(image_only(grey_row({0, 100, 127, 128, 200, 255})), "Solarize", 128).image),
            (std::vector<int>{0, 100, 127, 127, 55, 0}));
  // SolarizeAdd 44: values below 128 gain 44.
  EXPECT_EQ(channel_row(apply_op(image_only(grey_row({0, 100, 127, 128, 200})), "SolarizeAdd", 44).image),
            (std::vector<int>{44, 144, 171, 128, 200}));
  // Posterize 2 bits: the top two bits kept; 0 bits keeps the top bit (TF's clamped shift).
  EXPECT_EQ(channel_row(apply_op(image_only(grey_row({0, 63, 64, 130, 255})), "Posterize", 2).image),
            (std::vector<int>{0, 0, 64, 128, 192}));
  EXPECT_EQ(channel_row(apply_op(image_only(grey_row({0, 127, 128, 255})), "Posterize", 0).image),
            (std::vector<int>{0, 0, 128, 128}));
  // AutoContrast: 64..192 stretched to 0..255 (scale 255/128, truncated); a flat channel kept.
  at::Tensor stretch = grey_row({64, 128, 192});
  stretch[2].fill_(9);
  const Example contrasted = apply_op(image_only(stretch), "AutoContrast", 0);
  EXPECT_EQ(channel_row(contrasted.image, 0), (std::vector<int>{0, 127, 255}));
  EXPECT_EQ(channel_row(contrasted.image, 2), (std::vector<int>{9, 9, 9}));
  // Brightness: value x factor, truncated; clipped above 1.
  EXPECT_EQ(channel_row(apply_op(image_only(grey_row({201, 100})), "Brightness", 0.5).image), (std::vector<int>{100, 50}));
  EXPECT_EQ(channel_row(apply_op(image_only(grey_row({200, 100})), "Brightness", 1.5).image), (std::vector<int>{255, 150}));
}

TEST(AutoAugmentOps, EqualizeIsPilsHistogramEqualisation) {
  // 1024 pixels: 256 at 50, 256 at 100, 512 at 200. step = (1024 - 512) / 255 = 2; a value maps to
  // (pixels below it + 1) / 2: 50 -> 0, 100 -> 128, 200 -> 256, clipped to 255.
  at::Tensor image = at::empty({3, 32, 32}, at::kByte);
  image.slice(1, 0, 8).fill_(50);
  image.slice(1, 8, 16).fill_(100);
  image.slice(1, 16, 32).fill_(200);
  const at::Tensor out = apply_op(image_only(image), "Equalize", 0).image;
  EXPECT_EQ(out[1][0][0].item<int>(), 0);
  EXPECT_EQ(out[1][8][0].item<int>(), 128);
  EXPECT_EQ(out[1][31][31].item<int>(), 255);
  // Too few values for a step (step 0): unchanged.
  const at::Tensor few = grey_row({10, 10, 20, 30});
  EXPECT_TRUE(apply_op(image_only(few), "Equalize", 0).image.equal(few));
}

TEST(AutoAugmentOps, EnhanceOperationsBlendAsPil) {
  // Color 0.5 on pure red: grey = round(0.2989 x 255) = 76; 76 + 0.5 (255 - 76) = 165.5 -> 165,
  // 76 + 0.5 (0 - 76) = 38. At 1.9 it extrapolates and clips.
  at::Tensor red = at::zeros({3, 1, 1}, at::kByte);
  red[0].fill_(255);
  EXPECT_EQ(channel_row(apply_op(image_only(red), "Color", 0.5).image, 0), (std::vector<int>{165}));
  EXPECT_EQ(channel_row(apply_op(image_only(red), "Color", 0.5).image, 1), (std::vector<int>{38}));
  EXPECT_EQ(channel_row(apply_op(image_only(red), "Color", 1.9).image, 0), (std::vector<int>{255}));
  EXPECT_EQ(channel_row(apply_op(image_only(red), "Color", 1.9).image, 2), (std::vector<int>{0}));
  // Contrast 2 on half 100, half 200 grey: the mean 150 stays, 100 -> 50, 200 -> 250.
  EXPECT_EQ(channel_row(apply_op(image_only(grey_row({100, 200, 100, 200})), "Contrast", 2.0).image),
            (std::vector<int>{50, 250, 50, 250}));
  // Sharpness on a 5 x 5 black image with 130 at the centre: the smoothed centre is 5 x 130 / 13 =
  // 50, its eight neighbours 130 / 13 = 10, the border keeps its own 0. Factor 0.5: 90 and 5;
  // factor 1.9: 50 + 1.9 x 80 = 202 and 10 - 19 -> 0.
  at::Tensor dot = at::zeros({3, 5, 5}, at::kByte);
  dot.select(1, 2).select(1, 2).fill_(130);
  const at::Tensor soft = apply_op(image_only(dot), "Sharpness", 0.5).image;
  EXPECT_EQ(soft[0][2][2].item<int>(), 90);
  EXPECT_EQ(soft[0][1][1].item<int>(), 5);
  EXPECT_EQ(soft[0][2][3].item<int>(), 5);
  EXPECT_EQ(soft[0][0][0].item<int>(), 0);
  const at::Tensor sharp = apply_op(image_only(dot), "Sharpness", 1.9).image;
  EXPECT_EQ(sharp[1][2][2].item<int>(), 202);
  EXPECT_EQ(sharp[1][1][2].item<int>(), 0);
}

TEST(AutoAugmentOps, CutoutsFillGreySquares) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    // Cutout 3: a grey square of side up to 6 around a uniform pixel, cut by the 20 x 20 image.
    Example flat = image_only(at::full({3, 20, 20}, 7, at::kByte));
    const at::Tensor cut = apply_op(flat, "Cutout", 3, seed).image;
    const at::Tensor grey = cut[0] == 128;
    const int64_t rows = grey.any(1).sum().item<int64_t>(), cols = grey.any(0).sum().item<int64_t>();
    EXPECT_TRUE(rows >= 3 && rows <= 6 && cols >= 3 && cols <= 6) << seed;
    EXPECT_EQ(grey.sum().item<int64_t>(), rows * cols) << seed;  // one rectangle
    EXPECT_EQ(((cut == 128) | (cut == 7)).all().item<bool>(), true) << seed;
    // BBox_Cutout 0.75 on a 20 px box: pad int(0.75 x 20 / 2) = 7, a 14 x 14 square centred in the box.
    Example boxed = boxed_example(60, 60, {{10, 10, 30, 30}});
    boxed.image.fill_(7);
    const Example out = apply_op(boxed, "BBox_Cutout", 0.75, seed);
    const at::Tensor g = out.image[0] == 128;
    EXPECT_EQ(g.sum().item<int64_t>(), 14 * 14) << seed;
    const int64_t cy = g.any(1).nonzero().min().item<int64_t>() + 7, cx = g.any(0).nonzero().min().item<int64_t>() + 7;
    EXPECT_TRUE(cy >= 10 && cy < 30 && cx >= 10 && cx < 30) << seed;
    EXPECT_TRUE(out.boxes.equal(boxed.boxes));
    EXPECT_TRUE(out.masks.equal(boxed.masks));
  }
}

// ---- the geometric operations, by hand.

TEST(AutoAugmentOps, RotateBy90IsRot90AndMovesBoxesMasksAndLabels) {
  // Counter-clockwise on screen about the centre (50, 50): box [10, 20, 30, 60] -> corners
  // (u, v) -> (v, -u) around the centre -> [20, 70, 60, 90], as tf.image.rot90 moves it.
  const Example ex = boxed_example(100, 100, {{10, 20, 30, 60}});
  const Example out = apply_op(ex, "Rotate_BBox", 90);
  expect_box(out, 0, {20, 70, 60, 90});
  Example turned = ex;
  transform_rot90(turned);
  EXPECT_TRUE(out.image.equal(turned.image));
  EXPECT_TRUE(out.masks.equal(turned.masks));
  EXPECT_TRUE(out.label_map.equal(turned.label_map));
}

TEST(AutoAugmentOps, RotateBySmallAngleGivesTheCornersExtent) {
  // 30 degrees: a 20 x 10 box's corners span 10 cos 30 + 5 sin 30 = 11.160254 either side of its
  // centre across and 10 sin 30 + 5 cos 30 = 9.330127 down. Centred on the image: the centre stays.
  const Example centred = apply_op(boxed_example(100, 100, {{40, 45, 60, 55}}), "Rotate_BBox", 30);
  expect_box(centred, 0, {38.839746, 40.669873, 61.160254, 59.330127});
  // Centre (70, 50), 20 px right of the image's: counter-clockwise it goes to (50 + 20 cos 30,
  // 50 - 20 sin 30) = (67.320508, 40), up.
  const Example out = apply_op(boxed_example(100, 100, {{60, 45, 80, 55}}), "Rotate_BBox", 30);
  expect_box(out, 0, {56.160254, 30.669873, 78.480762, 49.330127});
  const at::Tensor mask = out.masks[0].nonzero().to(at::kDouble);
  EXPECT_NEAR(mask.select(1, 0).mean().item<double>() + 0.5, 40.0, 0.5);  // mean row of the mask
  EXPECT_NEAR(mask.select(1, 1).mean().item<double>() + 0.5, 67.32, 0.5);
  expect_masks_inside_boxes(out, "Rotate_BBox 30");
  // Uncovered corners are grey, their labels ignored.
  EXPECT_EQ(out.image[0][0][0].item<int>(), 128);
  EXPECT_EQ(out.label_map[0][0].item<int>(), 255);
}

TEST(AutoAugmentOps, TranslateMovesPixelsAndBoxesByWholePixels) {
  // +7: the content moves 7 px left (the reference's sign), the right 7 columns turn grey.
  const Example ex = boxed_example(40, 60, {{10, 5, 30, 25}, {2, 30, 12, 38}, {0, 0, 5, 5}});
  const Example left = apply_op(ex, "TranslateX_BBox", 7);
  EXPECT_TRUE(left.image.slice(2, 0, 53).equal(ex.image.slice(2, 7, 60)));
  EXPECT_TRUE((left.image.slice(2, 53, 60) == 128).all().item<bool>());
  ASSERT_EQ(left.num_boxes(), 2);  // [0, 0, 5, 5] left the image
  EXPECT_EQ(left.dropped_boxes, 1);
  expect_box(left, 0, {3, 5, 23, 25});
  expect_box(left, 1, {0, 30, 5, 38});  // clipped
  EXPECT_TRUE(left.masks[0].slice(1, 0, 53).equal(ex.masks[0].slice(1, 7, 60)));
  EXPECT_TRUE(left.label_map.slice(1, 0, 53).equal(ex.label_map.slice(1, 7, 60)));
  EXPECT_TRUE((left.label_map.slice(1, 53, 60) == 255).all().item<bool>());
  // -7: right; -3.9 moves whole pixels (3).
  const Example right = apply_op(ex, "TranslateX_BBox", -7.0);
  expect_box(right, 0, {17, 5, 37, 25});
  EXPECT_TRUE(right.image.slice(2, 7, 60).equal(ex.image.slice(2, 0, 53)));
  expect_box(apply_op(ex, "TranslateX_BBox", -3.9), 0, {13, 5, 33, 25});
  // Y: +4 moves up 4 rows.
  const Example up = apply_op(ex, "TranslateY_BBox", 4);
  expect_box(up, 0, {10, 1, 30, 21});
  EXPECT_TRUE(up.image.slice(1, 0, 36).equal(ex.image.slice(1, 4, 40)));
  // Past the image: everything grey, every box dropped.
  const Example gone = apply_op(ex, "TranslateY_BBox", 250);
  EXPECT_EQ(gone.num_boxes(), 0);
  EXPECT_EQ(gone.dropped_boxes, 3);
  EXPECT_TRUE((gone.image == 128).all().item<bool>());
}

TEST(AutoAugmentOps, ShearMovesBoxCornersAsComputed) {
  const Example ex = boxed_example(40, 60, {{20, 10, 40, 30}});
  // ShearX 0.1: x' = x - 0.1 y. Corners (20, 10) -> 19, (40, 10) -> 39, (20, 30) -> 17, (40, 30) -> 37.
  const Example sx = apply_op(ex, "ShearX_BBox", 0.1);
  expect_box(sx, 0, {17, 10, 39, 30});
  // Pixel (row 20, column 10) shows the source at x = 10.5 + 0.1 x 20.5 = 12.55: column 12.
  EXPECT_TRUE(sx.image.select(1, 20).select(1, 10).equal(ex.image.select(1, 20).select(1, 12)));
  expect_masks_inside_boxes(sx, "ShearX_BBox");
  // ShearX -0.2: x' = x + 0.2 y: 22, 42, 26, 46.
  expect_box(apply_op(ex, "ShearX_BBox", -0.2), 0, {22, 10, 46, 30});
  // ShearY 0.1: y' = y - 0.1 x: (20, 10) -> 8, (40, 10) -> 6, (20, 30) -> 28, (40, 30) -> 26.
  const Example sy = apply_op(ex, "ShearY_BBox", 0.1);
  expect_box(sy, 0, {20, 6, 40, 28});
  expect_masks_inside_boxes(sy, "ShearY_BBox");
}

// ---- the box-only operations.

TEST(AutoAugmentOps, BoxOnlyOperationsChangeOnlyBoxPixels) {
  const Example ex = boxed_example(40, 60, {{10, 5, 30, 25}, {40, 20, 55, 38}});
  // Solarize inside the boxes only.
  Example bright = ex;
  bright.image = at::full({3, 40, 60}, 200, at::kByte);
  const Example sol = apply_op(bright, "Solarize_Only_BBoxes", 128);
  EXPECT_EQ(sol.image[0][10][15].item<int>(), 55);
  EXPECT_EQ(sol.image[2][37][54].item<int>(), 55);
  EXPECT_EQ(sol.image[0][30][15].item<int>(), 200);
  EXPECT_EQ(sol.image[1][25][30].item<int>(), 200);  // just past both boxes
  // Flip mirrors each box's content (image, masks, labels) inside the box.
  Example half = ex;
  half.masks = ex.masks.clone();
  half.masks[0].slice(1, 20, 30).zero_();  // instance 0 covers the left half of its box
  const Example flipped = apply_op(half, "Flip_Only_BBoxes", 0);
  EXPECT_TRUE(flipped.image.slice(1, 5, 25).slice(2, 10, 30).equal(ex.image.slice(1, 5, 25).slice(2, 10, 30).flip({2})));
  EXPECT_TRUE(flipped.masks[0].slice(1, 20, 30).slice(0, 5, 25).all().item<bool>());
  EXPECT_FALSE(flipped.masks[0].slice(1, 10, 20).any().item<bool>());
  // TranslateX inside the box: content 5 px left, the box's right 5 columns grey, mask with it.
  const Example moved = apply_op(ex, "TranslateX_Only_BBoxes", 5);
  EXPECT_TRUE(moved.image.slice(1, 5, 25).slice(2, 10, 25).equal(ex.image.slice(1, 5, 25).slice(2, 15, 30)));
  EXPECT_TRUE((moved.image.slice(1, 5, 25).slice(2, 25, 30) == 128).all().item<bool>());
  EXPECT_EQ(moved.masks[0].sum().item<int64_t>(), 15 * 20);
  EXPECT_TRUE((moved.label_map.slice(0, 5, 25).slice(1, 25, 30) == 255).all().item<bool>());
  // Every box-only operation: boxes unchanged, nothing outside them changed; box chance 0: nothing.
  for (const char* op : {"Equalize_Only_BBoxes", "Solarize_Only_BBoxes", "Cutout_Only_BBoxes", "Flip_Only_BBoxes",
                         "Rotate_Only_BBoxes", "TranslateX_Only_BBoxes", "TranslateY_Only_BBoxes",
                         "ShearX_Only_BBoxes", "ShearY_Only_BBoxes"}) {
    const double argument = autoaugment_level_to_arg(op, 6);
    const Example out = apply_op(ex, op, argument, 4);
    EXPECT_TRUE(out.boxes.equal(ex.boxes)) << op;
    EXPECT_FALSE(out.image.equal(ex.image)) << op;
    expect_outside_boxes_unchanged(ex, out, op);
    expect_masks_inside_boxes(out, op);
    Example untouched = ex;
    untouched.image = ex.image.clone();
    Rng rng(4);
    apply_autoaugment_op(untouched, op, argument, 0.0, rng);
    EXPECT_TRUE(untouched.image.equal(ex.image)) << op;
  }
}

// ---- the policies.

TEST(AutoAugmentPolicy, EveryPolicyKeepsBoxesInsideAndMasksOnThem) {
  for (const std::string& policy : autoaugment_policy_names()) {
    std::set<std::string> outcomes;
    for (uint64_t seed = 0; seed < 40; ++seed) {
      const Example ex = boxed_example(48, 64, {{4, 4, 20, 30}, {30, 10, 58, 24}, {24, 32, 40, 46}});
      Example out = ex;
      out.image = ex.image.clone();
      Rng rng(seed);
      autoaugment_image(out, policy, rng);
      const std::string where = policy + " seed " + std::to_string(seed);
      ASSERT_EQ(out.image.sizes(), ex.image.sizes()) << where;
      ASSERT_EQ(out.label_map.sizes(), ex.label_map.sizes()) << where;
      ASSERT_EQ(out.masks.size(0), out.num_boxes()) << where;
      ASSERT_EQ(out.classes.size(0), out.num_boxes()) << where;
      EXPECT_EQ(out.num_boxes() + out.dropped_boxes, 3) << where;
      for (int64_t i = 0; i < out.num_boxes(); ++i) {
        const auto b = out.boxes[i];
        EXPECT_TRUE(b[0].item<float>() >= 0 && b[1].item<float>() >= 0 && b[2].item<float>() <= 64 &&
                    b[3].item<float>() <= 48 && b[2].item<float>() > b[0].item<float>() &&
                    b[3].item<float>() > b[1].item<float>())
            << where << " box " << i;
      }
      expect_masks_inside_boxes(out, where);
      outcomes.insert(std::to_string(out.image.sum().item<int64_t>()) + "/" + std::to_string(out.boxes.sum().item<float>()));
    }
    EXPECT_GE(outcomes.size(), 8u) << policy << ": seeds should draw different sub-policies";
  }
}

TEST(AutoAugmentPolicy, EveryOperationRunsOnAnExampleWithMasks) {
  std::set<std::string> ops = ops_of_policies();
  ops.insert(kUnusedOps.begin(), kUnusedOps.end());
  for (const std::string& op : ops) {
    for (int level : {0, 5, 10}) {
      const Example ex = boxed_example(48, 64, {{4, 4, 20, 30}, {30, 10, 58, 24}});
      const Example out = apply_op(ex, op, autoaugment_level_to_arg(op, level), 3);
      const std::string where = op + " level " + std::to_string(level);
      ASSERT_EQ(out.image.sizes(), ex.image.sizes()) << where;
      EXPECT_EQ(out.num_boxes() + out.dropped_boxes, 2) << where;
      expect_masks_inside_boxes(out, where);
    }
  }
}

TEST(AutoAugmentPolicy, SameSeedSameImageAndCallersImageUntouched) {
  const Example ex = boxed_example(48, 64, {{4, 4, 20, 30}, {30, 10, 58, 24}});
  const at::Tensor before = ex.image.clone(), masks_before = ex.masks.clone(), labels_before = ex.label_map.clone();
  int differing = 0;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    AugmentOptions o;
    o.resize = AugmentOptions::Resize::kNone;
    o.steps = {make_augment_step("autoaugment_image").set_text("policy_name", "v1")};
    Example a = ex, b = ex, c = ex;
    Rng ra(seed), rb(seed), rc(seed + 1000);
    augment(a, o, ra);
    augment(b, o, rb);
    augment(c, o, rc);
    EXPECT_TRUE(a.image.equal(b.image) && a.boxes.equal(b.boxes) && a.masks.equal(b.masks)) << seed;
    differing += !a.image.equal(c.image) || !a.boxes.equal(c.boxes);
  }
  EXPECT_GE(differing, 15);
  // The step copies before it writes: the caller's example is as it was.
  EXPECT_TRUE(ex.image.equal(before));
  EXPECT_TRUE(ex.masks.equal(masks_before));
  EXPECT_TRUE(ex.label_map.equal(labels_before));
}

// ---- the config step.

TEST(AutoAugmentConfig, PolicyNameIsCheckedAndNamed) {
  const AugmentStep step = make_augment_step("autoaugment_image");
  EXPECT_EQ(step.text("policy_name"), "v0");
  EXPECT_EQ(step.probability, 1.0);
  const std::string base =
      "model:\n  num_classes: 3\n  image_size: 64\ntrain_input:\n  annotations: data/train.json\n  augment:\n";
  const PipelineConfig c = parse_config(base + "    - autoaugment_image: {policy_name: v3}\n", "configs/x.yaml", {});
  EXPECT_EQ(c.train_input.augment.steps.at(0).text("policy_name"), "v3");
  try {
    parse_config(base + "    - autoaugment_image: {policy_name: v9}\n", "configs/x.yaml", {});
    ADD_FAILURE() << "v9 accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("configs/x.yaml:7: train_input.augment[0].autoaugment_image.policy_name: "
                                         "expected one of v0, v1, v2, v3, got \"v9\""),
              std::string::npos)
        << e.what();
  }
  // Built in code past the config's check: the step refuses it when it runs.
  AugmentOptions o;
  o.resize = AugmentOptions::Resize::kNone;
  o.steps = {make_augment_step("autoaugment_image").set_text("policy_name", "v9")};
  Example ex = boxed_example(16, 16, {{2, 2, 8, 8}});
  Rng rng(0);
  try {
    augment(ex, o, rng);
    ADD_FAILURE() << "v9 ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("autoaugment_image.policy_name: unknown policy 'v9'"), std::string::npos)
        << e.what();
  }
}

// A rough cost: each policy over 640 x 480 images with three boxes and their masks (printed).
