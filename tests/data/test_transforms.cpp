// Implements: tests of Transform geometry worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "data_test_util.h"
#include "detseg/data/transforms/augment.h"
#include "detseg/data/transforms/geometry.h"
#include "detseg/data/transforms/normalize.h"

using namespace detseg;
using detseg::datatest::synthetic_example;

namespace {
void expect_box(const at::Tensor& boxes, int64_t i, std::vector<float> want) {
  for (int64_t k = 0; k < 4; ++k)
    EXPECT_NEAR(boxes[i][k].item<float>(), want[static_cast<size_t>(k)], 1e-4) << "box " << i << " coord " << k;
}
}  // namespace

TEST(Transforms, HflipMirrorsBoxImageMaskAndLabels) {
  Example ex = synthetic_example(50, 100, {{10, 20, 30, 40}});
  ex.masks = at::zeros({1, 50, 100}, at::kByte);
  ex.masks[0][25][15] = 1;
  ex.label_map = at::zeros({50, 100}, at::kByte);
  ex.label_map[5][0] = 7;
  const at::Tensor before = ex.image.clone();
  transform_hflip(ex);
  // x -> W - x: [10, 30] -> [70, 90]; y unchanged.
  expect_box(ex.boxes, 0, {70, 20, 90, 40});
  EXPECT_TRUE(ex.image.select(2, 99).equal(before.select(2, 0)));
  EXPECT_EQ(ex.masks[0][25][84].item<int>(), 1);  // column 15 -> 99 - 15
  EXPECT_EQ(ex.label_map[5][99].item<int>(), 7);
  EXPECT_TRUE(ex.geometry.flipped());
  // Flipping twice is the identity.
  transform_hflip(ex);
  expect_box(ex.boxes, 0, {10, 20, 30, 40});
  EXPECT_DOUBLE_EQ(ex.geometry.scale_x, 1.0);
  EXPECT_DOUBLE_EQ(ex.geometry.offset_x, 0.0);
}

TEST(Transforms, KeepAspectResizeScalesBoxesAndSetsCanvas) {
  // 640x480 into 512x512: scale = min(512/480, 512/640) = 0.8 -> 512 wide, 384 high.
  Example ex = synthetic_example(480, 640, {{100, 50, 200, 150}, {0, 0, 640, 480}});
  resize_keep_aspect(ex, 512, 512);
  EXPECT_EQ(ex.height(), 384);
  EXPECT_EQ(ex.width(), 512);
  EXPECT_EQ(ex.canvas_height, 512);
  EXPECT_EQ(ex.canvas_width, 512);
  EXPECT_DOUBLE_EQ(ex.geometry.scale(), 0.8);
  expect_box(ex.boxes, 0, {80, 40, 160, 120});
  expect_box(ex.boxes, 1, {0, 0, 512, 384});
  // Predictions map back to original pixels.
  expect_box(geometry_invert_boxes(ex.geometry, ex.boxes), 0, {100, 50, 200, 150});
}

TEST(Transforms, MinMaxResizeFollowsTheShorterSideUnlessTheLongerPassesTheLimit) {
  // 640x480, min 600 max 1024: 600/480 = 1.25 -> 800x600 (800 <= 1024).
  Example ex = synthetic_example(480, 640, {{100, 40, 200, 120}});
  resize_min_max(ex, 600, 1024);
  EXPECT_EQ(ex.height(), 600);
  EXPECT_EQ(ex.width(), 800);
  EXPECT_EQ(ex.canvas_height, 0);  // no canvas: the batch is padded to its largest image
  expect_box(ex.boxes, 0, {125, 50, 250, 150});
  // 1000x200 (a panorama), min 600 max 1024: 600/200 = 3 would give 3000 wide, so 1024/1000.
  Example wide = synthetic_example(200, 1000, {{0, 0, 1000, 200}});
  resize_min_max(wide, 600, 1024);
  EXPECT_EQ(wide.width(), 1024);
  EXPECT_EQ(wide.height(), 205);  // round(200 * 1.024)
  EXPECT_DOUBLE_EQ(wide.geometry.scale_x, 1.024);
  expect_box(geometry_invert_boxes(wide.geometry, wide.boxes), 0, {0, 0, 1000, 200});
  EXPECT_THROW(resize_min_max(wide, 600, 500), Error);
}

TEST(Transforms, MinMaxJitterScalesBothDimensions) {
  Rng rng(3);
  MinMaxOptions o;
  o.min_dimension = 240;
  o.max_dimension = 400;
  o.min_scale = 0.5;
  o.max_scale = 1.5;
  std::set<int64_t> heights;
  for (int i = 0; i < 20; ++i) {
    Example ex = synthetic_example(480, 640, {{100, 40, 200, 120}});
    random_resize_min_max(ex, o, rng);
    // Aspect kept: 4:3 up to rounding, short side in [120, 360].
    EXPECT_NEAR(static_cast<double>(ex.width()) / static_cast<double>(ex.height()), 4.0 / 3.0, 0.02);
    EXPECT_GE(ex.height(), 120);
    EXPECT_LE(ex.height(), 360);
    heights.insert(ex.height());
  }
  EXPECT_GT(heights.size(), 10u);
  o.min_scale = o.max_scale = 1.0;
  Example ex = synthetic_example(480, 640, {});
  random_resize_min_max(ex, o, rng);
  EXPECT_EQ(ex.height(), 240);
  EXPECT_EQ(ex.width(), 320);
}

TEST(Transforms, FixedResizeUsesPerAxisScales) {
  Example ex = synthetic_example(480, 640, {{100, 60, 200, 150}});
  ex.label_map = at::zeros({480, 640}, at::kByte);
  ex.label_map.narrow(0, 240, 240).fill_(3);  // bottom half = class 3
  resize_fixed(ex, 320, 320);  // sx = 0.5, sy = 2/3
  expect_box(ex.boxes, 0, {50, 40, 100, 100});
  ASSERT_EQ(ex.label_map.sizes(), (at::IntArrayRef{320, 320}));
  EXPECT_EQ(ex.label_map[159][0].item<int>(), 0);
  EXPECT_EQ(ex.label_map[161][0].item<int>(), 3);
  EXPECT_EQ(ex.canvas_height, 0);
}

TEST(Transforms, CropShiftsClipsAndDropsDegenerateBoxes) {
  Example ex = synthetic_example(100, 100, {{0, 0, 30, 30}, {80, 80, 90, 90}, {25, 15, 45, 35}});
  const at::Tensor before = ex.image.clone();
  transform_crop(ex, /*y0=*/10, /*x0=*/20, /*h=*/50, /*w=*/50);
  ASSERT_EQ(ex.num_boxes(), 2);
  expect_box(ex.boxes, 0, {0, 0, 10, 20});   // [-20,-10,10,20] clipped
  expect_box(ex.boxes, 1, {5, 5, 25, 25});   // fully inside, shifted
  EXPECT_EQ(ex.classes[1].item<int64_t>(), 2);  // classes follow their boxes
  EXPECT_EQ(ex.dropped_boxes, 1);            // [60,70,70,80] has zero width after clipping
  EXPECT_TRUE(ex.image.equal(before.narrow(1, 10, 50).narrow(2, 20, 50)));
  EXPECT_DOUBLE_EQ(ex.geometry.offset_x, -20);
  EXPECT_DOUBLE_EQ(ex.geometry.offset_y, -10);
}

TEST(Transforms, ComposedGeometryMapsBackThroughFlipAndResize) {
  Example ex = synthetic_example(200, 400, {{40, 20, 100, 60}});
  transform_hflip(ex);                 // -> [300, 20, 360, 60]
  transform_resize(ex, 100, 200);      // x 0.5, y 0.5 -> [150, 10, 180, 30]
  expect_box(ex.boxes, 0, {150, 10, 180, 30});
  expect_box(geometry_apply_boxes(ex.geometry, at::tensor({40.f, 20.f, 100.f, 60.f}).view({1, 4})), 0, {150, 10, 180, 30});
  expect_box(geometry_invert_boxes(ex.geometry, ex.boxes), 0, {40, 20, 100, 60});
}

TEST(Transforms, ScaleJitterCropKeepsBoxesConsistentWithGeometry) {
  Rng rng(3);
  for (int trial = 0; trial < 10; ++trial) {
    Example ex = synthetic_example(480, 640, {{100, 50, 200, 150}, {600, 400, 640, 480}});
    const at::Tensor original = ex.boxes.clone();
    random_scale_jitter_crop(ex, 256, 256, ScaleJitterOptions{}, rng);
    EXPECT_LE(ex.height(), 256);
    EXPECT_LE(ex.width(), 256);
    EXPECT_EQ(ex.canvas_height, 256);
    // Every kept box is the original box under the recorded geometry, clipped to the image.
    at::Tensor want = geometry_apply_boxes(ex.geometry, original);
    want.select(1, 0).clamp_(0, ex.width());
    want.select(1, 2).clamp_(0, ex.width());
    want.select(1, 1).clamp_(0, ex.height());
    want.select(1, 3).clamp_(0, ex.height());
    for (int64_t i = 0; i < ex.num_boxes(); ++i) {
      const int64_t src = ex.classes[i].item<int64_t>();
      EXPECT_TRUE(ex.boxes[i].allclose(want[src], 1e-4, 1e-3)) << "trial " << trial;
    }
    EXPECT_EQ(ex.num_boxes() + ex.dropped_boxes, 2);
  }
}

TEST(Transforms, ScaleJitterWithUnitScaleIsKeepAspectResize) {
  Rng rng(1);
  Example ex = synthetic_example(480, 640, {{100, 50, 200, 150}});
  ScaleJitterOptions o;
  o.min_scale = o.max_scale = 1.0;
  random_scale_jitter_crop(ex, 256, 256, o, rng);
  // scale = min(256/480, 256/640) = 0.4: 192x256, nothing to crop.
  EXPECT_EQ(ex.height(), 192);
  EXPECT_EQ(ex.width(), 256);
  expect_box(ex.boxes, 0, {40, 20, 80, 60});
}

TEST(Transforms, DeepLabScaleDownPadsImageAndIgnoreLabel) {
  Rng rng(5);
  Example ex = synthetic_example(10, 10);
  ex.label_map = at::full({10, 10}, 4, at::kByte);
  DeepLabCropOptions o;
  o.min_scale = o.max_scale = 0.5;  // 10x10 -> 5x5, padded to 8x8 at the bottom/right
  random_scale_crop_pad(ex, 8, 8, o, rng);
  ASSERT_EQ(ex.label_map.sizes(), (at::IntArrayRef{8, 8}));
  EXPECT_EQ(ex.label_map.eq(4).sum().item<int64_t>(), 25);
  EXPECT_EQ(ex.label_map.eq(255).sum().item<int64_t>(), 64 - 25);
  EXPECT_EQ(ex.label_map[4][4].item<int>(), 4);
  EXPECT_EQ(ex.label_map[5][5].item<int>(), 255);
  EXPECT_EQ(ex.image[0][7][7].item<int>(), 124);  // mean colour fill
  EXPECT_EQ(ex.image[2][7][7].item<int>(), 104);
}

TEST(Transforms, DeepLabScalesComeFromTheStepGrid) {
  Rng rng(11);
  std::set<int64_t> heights;
  for (int i = 0; i < 60; ++i) {
    Example ex = synthetic_example(40, 40);
    ex.label_map = at::zeros({40, 40}, at::kByte);
    // A 100x100 crop never cuts: the unpadded area shows the scale.
    random_scale_crop_pad(ex, 100, 100, DeepLabCropOptions{}, rng);
    const int64_t side = std::lround(ex.geometry.scale_y * 40);
    heights.insert(side);
    EXPECT_EQ(ex.label_map.ne(255).sum().item<int64_t>(), side * side);  // the rest is padding
  }
  // 0.5, 0.75, ..., 2.0 of 40 px
  EXPECT_EQ(heights, (std::set<int64_t>{20, 30, 40, 50, 60, 70, 80}));
}

TEST(Transforms, NormalizeMatchesFormula) {
  at::Tensor img = at::zeros({3, 1, 2}, at::kByte);
  img[0][0][1] = 255;
  at::Tensor out = normalize_image(img);
  EXPECT_NEAR(out[0][0][1].item<float>(), (1 - 0.485f) / 0.229f, 1e-5);
  EXPECT_NEAR(out[2][0][0].item<float>(), -0.406f / 0.225f, 1e-5);
}

TEST(Transforms, RejectsNonImageInput) {
  Example ex;
  ex.image = at::zeros({5, 5}, at::kByte);
  EXPECT_THROW(transform_hflip(ex), Error);
  Example ok = synthetic_example(4, 4);
  EXPECT_THROW(transform_crop(ok, 2, 2, 4, 4), Error);
  EXPECT_THROW(transform_pad(ok, 2, 2, {0, 0, 0}), Error);
}
