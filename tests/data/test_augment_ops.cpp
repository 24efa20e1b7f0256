// Implements: worked-value tests of the augmentation steps' operations: colour changes against the
// reference's formulas (tf.image.adjust_* on image / 255), box / mask / label-map geometry by hand
// (flips, rotation, pads, crops with overlap, large-scale jitter, box jitter) and the mixing steps'
// compositing (mosaic, mixup, copy-paste).
#include <gtest/gtest.h>

#include <cmath>

#include "data_test_util.h"
#include "detseg/data/transforms/colour.h"
#include "detseg/data/transforms/geometry.h"
#include "detseg/data/transforms/mix.h"
#include "detseg/data/transforms/steps.h"

using namespace detseg;
using detseg::datatest::synthetic_example;

namespace {

void expect_box(const at::Tensor& boxes, int64_t i, std::vector<float> want, float tol = 1e-4f) {
  for (int64_t k = 0; k < 4; ++k)
    EXPECT_NEAR(boxes[i][k].item<float>(), want[static_cast<size_t>(k)], tol) << "box " << i << " coord " << k;
}

// A 1 x n image whose pixels are the given RGB triples.
at::Tensor pixels(const std::vector<std::array<int, 3>>& rgb) {
  const int64_t n = static_cast<int64_t>(rgb.size());
  at::Tensor image = at::empty({3, 1, n}, at::kByte);
  for (int64_t i = 0; i < n; ++i)
    for (int c = 0; c < 3; ++c) image[c][0][i] = rgb[static_cast<size_t>(i)][static_cast<size_t>(c)];
  return image;
}

std::array<int, 3> pixel(const at::Tensor& image, int64_t i) {
  return {image[0][0][i].item<int>(), image[1][0][i].item<int>(), image[2][0][i].item<int>()};
}

// One instance mask per box, exactly the box's pixels (integer boxes).
at::Tensor box_masks(const Example& ex) {
  at::Tensor masks = at::zeros({ex.num_boxes(), ex.height(), ex.width()}, at::kByte);
  for (int64_t i = 0; i < ex.num_boxes(); ++i) {
    const auto b = ex.boxes[i];
    masks[i].narrow(0, b[1].item<int64_t>(), b[3].item<int64_t>() - b[1].item<int64_t>())
        .narrow(1, b[0].item<int64_t>(), b[2].item<int64_t>() - b[0].item<int64_t>())
        .fill_(1);
  }
  return masks;
}

Example flat(int64_t h, int64_t w, int value, const std::vector<std::vector<float>>& boxes) {
  Example ex = synthetic_example(h, w, boxes);
  ex.image.fill_(value);
  ex.masks = box_masks(ex);
  return ex;
}

}  // namespace

// ---- colour: tf.image's formulas on [0, 1] values, rounded back to 8 bits.

TEST(AugmentColour, BrightnessAddsDeltaOnTheUnitScaleAndClips) {
  at::Tensor image = pixels({{0, 100, 250}, {30, 128, 255}});
  adjust_brightness(image, 0.2);  // + 0.2 x 255 = + 51
  EXPECT_EQ(pixel(image, 0), (std::array<int, 3>{51, 151, 255}));  // 250 + 51 clips at 1.0
  EXPECT_EQ(pixel(image, 1), (std::array<int, 3>{81, 179, 255}));
  adjust_brightness(image, -0.4);  // - 102
  EXPECT_EQ(pixel(image, 0), (std::array<int, 3>{0, 49, 153}));
}

TEST(AugmentColour, ContrastScalesAboutEachChannelsMean) {
  // R: 0, 50, 100, 150 (mean 75); G: 200 everywhere; B: 10, 20, 30, 40 (mean 25); factor 2.
  at::Tensor image = pixels({{0, 200, 10}, {50, 200, 20}, {100, 200, 30}, {150, 200, 40}});
  adjust_contrast(image, 2.0);
  EXPECT_EQ(pixel(image, 0), (std::array<int, 3>{0, 200, 0}));  // (0 - 75) x 2 + 75 < 0, (10 - 25) x 2 + 25 < 0
  EXPECT_EQ(pixel(image, 1), (std::array<int, 3>{25, 200, 15}));
  EXPECT_EQ(pixel(image, 2), (std::array<int, 3>{125, 200, 35}));
  EXPECT_EQ(pixel(image, 3), (std::array<int, 3>{225, 200, 55}));
}

TEST(AugmentColour, HueTurnsTheColourWheel) {
  // Red + 1/3 turn is green; (0.8, 0.4, 0.2) has h = 0.2 / 0.6 / 6 = 1/18, s = 0.75, v = 0.8, and
  // half a turn gives h = 10/18: sector 3 with f = 1/3 -> (p, q, v) = (0.2, 0.6, 0.8).
  at::Tensor image = pixels({{255, 0, 0}, {204, 102, 51}});
  adjust_hue(image, 1.0 / 3.0);
  EXPECT_EQ(pixel(image, 0), (std::array<int, 3>{0, 255, 0}));
  image = pixels({{204, 102, 51}});
  adjust_hue(image, 0.5);
  EXPECT_EQ(pixel(image, 0), (std::array<int, 3>{51, 153, 204}));
  adjust_hue(image, -0.5);  // and back
  EXPECT_EQ(pixel(image, 0), (std::array<int, 3>{204, 102, 51}));
}

TEST(AugmentColour, SaturationScalesHsvSaturationAndClips) {
  // (0.8, 0.4, 0.2): s = 0.75. x0 -> grey at v; x2 -> s clips to 1: (v, v f, 0) with f = 1/3.
  at::Tensor image = pixels({{204, 102, 51}});
  adjust_saturation(image, 0.0);
  EXPECT_EQ(pixel(image, 0), (std::array<int, 3>{204, 204, 204}));
  image = pixels({{204, 102, 51}});
  adjust_saturation(image, 2.0);
  EXPECT_EQ(pixel(image, 0), (std::array<int, 3>{204, 68, 0}));
}

TEST(AugmentColour, HsvRoundTripsEveryPrimaryAndSecondary) {
  const std::vector<std::array<float, 3>> colours = {{1, 0, 0}, {1, 1, 0}, {0, 1, 0}, {0, 1, 1}, {0, 0, 1}, {1, 0, 1}};
  for (size_t i = 0; i < colours.size(); ++i) {
    float h, s, v, r, g, b;
    rgb_to_hsv(colours[i][0], colours[i][1], colours[i][2], h, s, v);
    EXPECT_NEAR(h, static_cast<float>(i) / 6.0f, 1e-6);  // the wheel in sixths
    hsv_to_rgb(h, s, v, r, g, b);
    EXPECT_NEAR(r, colours[i][0], 1e-6);
    EXPECT_NEAR(g, colours[i][1], 1e-6);
    EXPECT_NEAR(b, colours[i][2], 1e-6);
  }
}

TEST(AugmentColour, GrayUsesTheLumaWeights) {
  // 0.2989 x 255 = 76.2, 0.5870 x 255 = 149.7, 0.1140 x 255 = 29.1; (100, 150, 200) -> 140.74.
  at::Tensor image = pixels({{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {100, 150, 200}});
  rgb_to_gray(image);
  EXPECT_EQ(pixel(image, 0), (std::array<int, 3>{76, 76, 76}));
  EXPECT_EQ(pixel(image, 1), (std::array<int, 3>{150, 150, 150}));
  EXPECT_EQ(pixel(image, 2), (std::array<int, 3>{29, 29, 29}));
  EXPECT_EQ(pixel(image, 3), (std::array<int, 3>{141, 141, 141}));
}

TEST(AugmentColour, PixelValueScaleMultipliesAndClips) {
  Rng rng(3);
  at::Tensor image = pixels({{100, 255, 7}});
  scale_pixel_values(image, 0.5, 0.5, rng);  // 127.5 rounds up
  EXPECT_EQ(pixel(image, 0), (std::array<int, 3>{50, 128, 4}));
  image = pixels({{200, 250, 10}});
  scale_pixel_values(image, 2.0, 2.0, rng);
  EXPECT_EQ(pixel(image, 0), (std::array<int, 3>{255, 255, 20}));
}

TEST(AugmentColour, JpegKeepsFlatMidGreyAndLowQualityLosesMore) {
  // A flat 128 grey has only a zero DC coefficient after JPEG's level shift: exact at any quality.
  at::Tensor grey = at::full({3, 16, 16}, 128, at::kByte);
  jpeg_round_trip(grey, 10);
  EXPECT_TRUE(grey.eq(128).all().item<bool>());
  Example ex = synthetic_example(32, 48);
  at::Tensor high = ex.image.clone(), low = ex.image.clone();
  jpeg_round_trip(high, 95);
  jpeg_round_trip(low, 5);
  auto error = [&](const at::Tensor& t) { return (t.to(at::kFloat) - ex.image.to(at::kFloat)).abs().mean().item<float>(); };
  EXPECT_LT(error(high), error(low));
  EXPECT_GT(error(low), 1.0f);
}

TEST(AugmentColour, PatchGaussianChangesOnlyItsSquare) {
  // Centre (y 5, x 6), side 4: rows 3..6, columns 4..7.
  at::Tensor image = at::full({3, 12, 12}, 128, at::kByte);
  Rng rng(7);
  add_patch_gaussian(image, 5, 6, 4, 0.5, rng);
  const at::Tensor changed = (image != 128).any(0);
  EXPECT_TRUE(changed.narrow(0, 3, 4).narrow(1, 4, 4).any().item<bool>());
  changed.narrow(0, 3, 4).narrow(1, 4, 4).zero_();
  EXPECT_FALSE(changed.any().item<bool>());
  // Near a corner the square is clipped: centre (0, 0), side 4 -> rows 0..1, columns 0..1.
  image.fill_(128);
  add_patch_gaussian(image, 0, 0, 4, 0.5, rng);
  const at::Tensor corner = (image != 128).any(0);
  corner.narrow(0, 0, 2).narrow(1, 0, 2).zero_();
  EXPECT_FALSE(corner.any().item<bool>());
  image.fill_(128);
  add_patch_gaussian(image, 5, 5, 4, 0.0, rng);  // sigma 0: nothing
  EXPECT_TRUE(image.eq(128).all().item<bool>());
}

TEST(AugmentColour, BlackPatchZeroesItsSquare) {
  at::Tensor image = at::full({3, 10, 12}, 200, at::kByte);
  black_patch(image, 2, 3, 5);
  EXPECT_EQ(image.eq(0).sum().item<int64_t>(), 3 * 25);
  EXPECT_TRUE(image.narrow(1, 2, 5).narrow(2, 3, 5).eq(0).all().item<bool>());
  black_patch(image, 8, 10, 5);  // clipped at the corner: 2 x 2
  EXPECT_EQ(image.eq(0).sum().item<int64_t>(), 3 * (25 + 4));
}

// ---- geometry: boxes, masks and label maps by hand.

TEST(AugmentGeometry, VerticalFlipMirrorsRows) {
  Example ex = synthetic_example(50, 100, {{10, 20, 30, 40}});
  ex.masks = at::zeros({1, 50, 100}, at::kByte);
  ex.masks[0][25][15] = 1;
  ex.label_map = at::zeros({50, 100}, at::kByte);
  ex.label_map[5][0] = 7;
  const at::Tensor before = ex.image.clone();
  transform_vflip(ex);
  expect_box(ex.boxes, 0, {10, 10, 30, 30});  // y -> 50 - y
  EXPECT_TRUE(ex.image.select(1, 49).equal(before.select(1, 0)));
  EXPECT_EQ(ex.masks[0][24][15].item<int>(), 1);
  EXPECT_EQ(ex.label_map[44][0].item<int>(), 7);
  EXPECT_DOUBLE_EQ(ex.geometry.scale_y, -1.0);
  EXPECT_DOUBLE_EQ(ex.geometry.offset_y, 50.0);
}

TEST(AugmentGeometry, Rotation90TurnsCounterClockwise) {
  // H 50, W 100: box [x1, y1, x2, y2] -> [y1, W - x2, y2, W - x1]; pixel (x, y) -> (y, W - 1 - x).
  Example ex = synthetic_example(50, 100, {{10, 20, 30, 40}});
  ex.masks = at::zeros({1, 50, 100}, at::kByte);
  ex.masks[0][25][15] = 1;
  ex.label_map = at::zeros({50, 100}, at::kByte);
  ex.label_map[5][0] = 7;
  const at::Tensor before = ex.image.clone();
  transform_rot90(ex);
  EXPECT_EQ(ex.height(), 100);
  EXPECT_EQ(ex.width(), 50);
  expect_box(ex.boxes, 0, {20, 70, 40, 90});
  EXPECT_EQ(ex.masks[0][84][25].item<int>(), 1);
  EXPECT_EQ(ex.masks.sum().item<int64_t>(), 1);
  EXPECT_EQ(ex.label_map[99][5].item<int>(), 7);
  for (int c = 0; c < 3; ++c)
    EXPECT_EQ(ex.image[c][84][25].item<int>(), before[c][25][15].item<int>());
  // Four turns are the identity.
  for (int k = 0; k < 3; ++k) transform_rot90(ex);
  EXPECT_TRUE(ex.image.equal(before));
  expect_box(ex.boxes, 0, {10, 20, 30, 40});
}

TEST(AugmentGeometry, PadAtShiftsBoxesAndFillsMasksAndLabels) {
  Example ex = synthetic_example(10, 20, {{1, 2, 3, 4}});
  ex.masks = box_masks(ex);
  ex.label_map = at::ones({10, 20}, at::kByte);
  transform_pad_at(ex, 3, 5, 20, 30, {1, 2, 3}, 255);
  EXPECT_EQ(ex.height(), 20);
  EXPECT_EQ(ex.width(), 30);
  expect_box(ex.boxes, 0, {6, 5, 8, 7});
  EXPECT_EQ(ex.image[2][0][0].item<int>(), 3);
  EXPECT_EQ(ex.label_map[0][0].item<int>(), 255);
  EXPECT_EQ(ex.label_map[3][5].item<int>(), 1);
  EXPECT_EQ(ex.label_map.eq(1).sum().item<int64_t>(), 200);
  EXPECT_EQ(ex.masks[0][5][6].item<int>(), 1);
  EXPECT_EQ(ex.masks.sum().item<int64_t>(), 4);
  EXPECT_DOUBLE_EQ(ex.geometry.offset_x, 5.0);
  EXPECT_DOUBLE_EQ(ex.geometry.offset_y, 3.0);
}

TEST(AugmentGeometry, CropKeepsBoxesByTheFractionInside) {
  // Window [10, 30)^2. A: 100 of 400 px inside (0.25); B: wholly inside; C: 25 of 400 (0.0625); D: outside.
  auto make = [] {
    Example ex = synthetic_example(60, 60, {{0, 0, 20, 20}, {12, 12, 18, 18}, {25, 25, 45, 45}, {40, 40, 50, 50}});
    ex.masks = box_masks(ex);
    return ex;
  };
  Example ex = make();
  transform_crop_keep_overlap(ex, 10, 10, 20, 20, 0.2, true);
  ASSERT_EQ(ex.num_boxes(), 2);
  expect_box(ex.boxes, 0, {0, 0, 10, 10});  // A clipped to the window
  expect_box(ex.boxes, 1, {2, 2, 8, 8});
  EXPECT_TRUE(ex.classes.equal(at::tensor({0, 1}, at::kLong)));
  EXPECT_EQ(ex.masks.size(0), 2);
  EXPECT_EQ(ex.masks[0].sum().item<int64_t>(), 100);
  EXPECT_EQ(ex.dropped_boxes, 2);
  // Threshold 0.05 keeps C too; clip_cut false drops every box the window cuts (A and C).
  ex = make();
  transform_crop_keep_overlap(ex, 10, 10, 20, 20, 0.05, true);
  EXPECT_EQ(ex.num_boxes(), 3);
  ex = make();
  transform_crop_keep_overlap(ex, 10, 10, 20, 20, 0.05, false);
  ASSERT_EQ(ex.num_boxes(), 1);
  expect_box(ex.boxes, 0, {2, 2, 8, 8});
  EXPECT_EQ(ex.dropped_boxes, 3);
}

TEST(AugmentGeometry, SampledCropWindowsFollowAreaAspectAndCover) {
  Rng rng(11);
  // No boxes and nothing to cover: a 1:1 window of a quarter of the area, offset in [0, 50).
  const at::Tensor none = at::zeros({0, 4}, at::kFloat);
  for (int i = 0; i < 20; ++i) {
    CropWindow w = sample_distorted_bounding_box(100, 100, none, 0.0, {1, 1}, {0.25, 0.25}, rng);
    EXPECT_EQ(w.h, 50);
    EXPECT_EQ(w.w, 50);
    EXPECT_GE(w.y0, 0);
    EXPECT_LT(w.y0, 50);
    EXPECT_LT(w.x0, 50);
  }
  // A box the size of the image, min_object_covered 1: only the whole image covers all of it.
  const at::Tensor whole = at::tensor({0.f, 0.f, 80.f, 60.f}).view({1, 4});
  CropWindow w = sample_distorted_bounding_box(60, 80, whole, 1.0, {0.75, 1.33}, {0.1, 1.0}, rng);
  EXPECT_EQ(w.y0, 0);
  EXPECT_EQ(w.x0, 0);
  EXPECT_EQ(w.h, 60);
  EXPECT_EQ(w.w, 80);
  // Any window found covers at least half of the small box, and keeps the area bounds.
  const at::Tensor small = at::tensor({30.f, 30.f, 50.f, 50.f}).view({1, 4});
  for (int i = 0; i < 50; ++i) {
    CropWindow c = sample_distorted_bounding_box(100, 100, small, 0.5, {0.5, 2.0}, {0.1, 0.5}, rng);
    const double iw = std::min<double>(50, c.x0 + c.w) - std::max<double>(30, c.x0);
    const double ih = std::min<double>(50, c.y0 + c.h) - std::max<double>(30, c.y0);
    EXPECT_GE(std::max(0.0, iw) * std::max(0.0, ih) / 400.0, 0.5);
    EXPECT_LE(c.w * c.h, 5000);
    EXPECT_GE(c.w * c.h, 1000);
  }
}

TEST(AugmentGeometry, JitterMovesSidesWithinTheRatio) {
  Rng rng(5);
  for (int i = 0; i < 20; ++i) {
    Example ex = synthetic_example(100, 100, {{40, 40, 60, 60}});
    jitter_boxes(ex, 0.1, "expand_symmetric", rng);
    const float d = 40 - ex.boxes[0][0].item<float>();  // 20 x U(0, 0.1)
    EXPECT_GE(d, 0);
    EXPECT_LE(d, 2.0f);
    expect_box(ex.boxes, 0, {40 - d, 40 - d, 60 + d, 60 + d});
    Example shrink = synthetic_example(100, 100, {{40, 40, 60, 60}});
    jitter_boxes(shrink, 0.1, "shrink", rng);
    EXPECT_GE(shrink.boxes[0][0].item<float>(), 40);
    EXPECT_LE(shrink.boxes[0][2].item<float>(), 60);
    EXPECT_LE(shrink.boxes[0][0].item<float>(), 42);
  }
  // Clipped at the border.
  Example edge = synthetic_example(100, 100, {{0, 0, 100, 100}});
  jitter_boxes(edge, 0.5, "expand", rng);
  expect_box(edge.boxes, 0, {0, 0, 100, 100});
}

// ---- mixing.

TEST(AugmentMix, MosaicMeetsAtTheCentreAndKeepsTheMiddle) {
  // Four 8 x 8 images of grey 10, 20, 30, 40, one full-image box each; s 8: canvas 16, window [4, 12).
  // Centre (6, 10): image 0 lands at [0, 6) x [2, 10) of the canvas, so [4, 6) x [4, 10) shows: output
  // columns 0-1, rows 0-5, its box [0, 0, 2, 6]; the others fill the rest around (2, 6).
  std::vector<Example> four;
  for (int k = 0; k < 4; ++k) {
    four.push_back(flat(8, 8, 10 * (k + 1), {{0, 0, 8, 8}}));
    four.back().classes.fill_(k);
    four.back().label_map = at::full({8, 8}, k, at::kByte);
    four.back().image_id = 100 + k;
  }
  Example m = mosaic_examples(std::move(four), 8, 6, 10);
  EXPECT_EQ(m.height(), 8);
  EXPECT_EQ(m.width(), 8);
  EXPECT_EQ(m.image_id, 100);
  ASSERT_EQ(m.num_boxes(), 4);
  expect_box(m.boxes, 0, {0, 0, 2, 6});
  expect_box(m.boxes, 1, {2, 0, 8, 6});
  expect_box(m.boxes, 2, {0, 6, 2, 8});
  expect_box(m.boxes, 3, {2, 6, 8, 8});
  EXPECT_TRUE(m.classes.equal(at::tensor({0, 1, 2, 3}, at::kLong)));
  EXPECT_EQ(m.image[0][0][0].item<int>(), 10);
  EXPECT_EQ(m.image[1][0][2].item<int>(), 20);
  EXPECT_EQ(m.image[2][6][1].item<int>(), 30);
  EXPECT_EQ(m.image[0][7][7].item<int>(), 40);
  EXPECT_EQ(m.label_map[5][1].item<int>(), 0);
  EXPECT_EQ(m.label_map[6][2].item<int>(), 3);
  // Each mask is its box's pixels.
  for (int64_t i = 0; i < 4; ++i) {
    const auto b = m.boxes[i];
    const int64_t area = (b[2] - b[0]).item<int64_t>() * (b[3] - b[1]).item<int64_t>();
    EXPECT_EQ(m.masks[i].sum().item<int64_t>(), area);
  }
  // Small images leave grey canvas: 4 x 4 ones (box [1, 1, 3, 3]) at centre (10, 10): image 0 covers
  // canvas [6, 10)^2 = output [2, 6)^2; image 1 shows its left two columns at output columns 6-7, so
  // its box is cut to [1, 1, 2, 3] and shifted by (6, 2).
  auto small = [] {
    std::vector<Example> four;
    for (int k = 0; k < 4; ++k) four.push_back(flat(4, 4, 10 * (k + 1), {{1, 1, 3, 3}}));
    four[0].image_id = 7;
    return four;
  };
  Example g = mosaic_examples(small(), 8, 10, 10);
  EXPECT_EQ(g.image[0][0][0].item<int>(), kMixFill);
  EXPECT_EQ(g.image[0][2][2].item<int>(), 10);
  EXPECT_EQ(g.image[0][2][6].item<int>(), 20);
  ASSERT_EQ(g.num_boxes(), 4);
  expect_box(g.boxes, 0, {3, 3, 5, 5});
  expect_box(g.boxes, 1, {7, 3, 8, 5});
  expect_box(g.boxes, 2, {3, 7, 5, 8});
  expect_box(g.boxes, 3, {7, 7, 8, 8});
  // At centre (4, 4) only image 3 reaches the window: the others' boxes are dropped and counted.
  Example corner = mosaic_examples(small(), 8, 4, 4);
  ASSERT_EQ(corner.num_boxes(), 1);
  expect_box(corner.boxes, 0, {1, 1, 3, 3});
  EXPECT_EQ(corner.dropped_boxes, 3);
  EXPECT_EQ(corner.image_id, 7);
  EXPECT_EQ(corner.image[0][0][0].item<int>(), 40);
  EXPECT_EQ(corner.image[0][5][5].item<int>(), kMixFill);
}

TEST(AugmentMix, MixupBlendsPixelsAndKeepsBothBoxSets) {
  Example a = flat(6, 8, 100, {{0, 0, 4, 4}});
  Example b = flat(6, 8, 200, {{2, 2, 8, 6}, {1, 1, 2, 2}});
  b.classes = at::tensor({5, 6}, at::kLong);
  mixup_examples(a, b, 0.25);  // 0.25 x 100 + 0.75 x 200
  EXPECT_TRUE(a.image.eq(175).all().item<bool>());
  ASSERT_EQ(a.num_boxes(), 3);
  expect_box(a.boxes, 1, {2, 2, 8, 6});
  EXPECT_TRUE(a.classes.equal(at::tensor({0, 5, 6}, at::kLong)));
  EXPECT_EQ(a.masks.size(0), 3);
}

TEST(AugmentMix, CopyPasteCoversMasksShrinksBoxesAndDropsHiddenInstances) {
  // ex: A [0, 0, 6, 4], B [6, 6, 10, 10]; pasted: C [3, 0, 10, 4] and D [6, 6, 10, 10].
  // A keeps columns 0-2 -> [0, 0, 3, 4]; B is covered wholly and goes.
  Example ex = flat(10, 10, 50, {{0, 0, 6, 4}, {6, 6, 10, 10}});
  Example other = flat(10, 10, 220, {{3, 0, 10, 4}, {6, 6, 10, 10}, {0, 6, 2, 8}});
  other.classes = at::tensor({7, 8, 9}, at::kLong);
  copy_paste_examples(ex, other, at::tensor({1, 1, 0}).to(at::kBool));
  ASSERT_EQ(ex.num_boxes(), 3);
  expect_box(ex.boxes, 0, {0, 0, 3, 4});
  expect_box(ex.boxes, 1, {3, 0, 10, 4});
  expect_box(ex.boxes, 2, {6, 6, 10, 10});
  EXPECT_TRUE(ex.classes.equal(at::tensor({0, 7, 8}, at::kLong)));
  EXPECT_EQ(ex.dropped_boxes, 1);
  EXPECT_EQ(ex.masks[0].sum().item<int64_t>(), 12);
  EXPECT_EQ(ex.image[0][0][5].item<int>(), 220);  // under C
  EXPECT_EQ(ex.image[0][0][1].item<int>(), 50);
  EXPECT_EQ(ex.image[0][7][1].item<int>(), 50);  // under the unpasted instance
}
