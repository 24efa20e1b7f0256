// Implements: tests of Boxes, box_ops, anchors and the box coder with hand-worked values.
#include <cmath>

#include "detseg/core/error.h"
#include "detseg/ops/anchors.h"
#include "detseg/ops/box_coder.h"
#include "detseg/ops/box_ops.h"
#include "ops/ops_test_util.h"

using namespace detseg;
using namespace detseg::testing;

TEST(Boxes, IndexAppliesToEveryField) {
  Boxes b(F({0, 0, 1, 1, 2, 2, 4, 4, 5, 5, 9, 9}, {3, 4}));
  b.scores = F({0.1f, 0.2f, 0.3f}, {3});
  b.classes = L({7, 8, 9});
  b.set_field("weights", F({1, 2, 3}, {3}));
  auto s = b.index(L({2, 0}));
  expect_close(s.boxes, F({5, 5, 9, 9, 0, 0, 1, 1}, {2, 4}));
  EXPECT_EQ(to_vec(s.classes), (std::vector<int64_t>{9, 7}));
  expect_close(s.field("weights"), F({3, 1}, {2}));
  auto m = b.index(L({0, 1, 1}).to(at::kBool));
  EXPECT_EQ(m.size(), 2);
  EXPECT_THROW(b.field("nope"), Error);
  EXPECT_THROW(b.set_field("bad", F({1, 2}, {2})), Error);
  auto c = cat({b, m});
  EXPECT_EQ(c.size(), 5);
  EXPECT_EQ(to_vec(c.classes), (std::vector<int64_t>{7, 8, 9, 8, 9}));
}

TEST(Boxes, RejectsBadTensors) {
  EXPECT_THROW(Boxes(F({0, 0, 1}, {1, 3})), Error);
  EXPECT_THROW(Boxes(L({0, 0, 1, 1}).view({1, 4})), Error);
  EXPECT_THROW(Boxes(F({0, 0, NAN, 1}, {1, 4})), Error);
  Boxes empty(at::zeros({0, 4}));
  EXPECT_TRUE(empty.empty());
}

TEST(Boxes, Conversions) {
  expect_close(xywh_to_xyxy(F({1, 2, 3, 4}, {1, 4})), F({1, 2, 4, 6}, {1, 4}));
  expect_close(xyxy_to_xywh(F({1, 2, 4, 6}, {1, 4})), F({1, 2, 3, 4}, {1, 4}));
  expect_close(cxcywh_to_xyxy(F({2, 3, 2, 4}, {1, 4})), F({1, 1, 3, 5}, {1, 4}));
  expect_close(xyxy_to_cxcywh(F({1, 1, 3, 5}, {1, 4})), F({2, 3, 2, 4}, {1, 4}));
  auto abs = normalized_yxyx_to_xyxy(F({0.1f, 0.2f, 0.5f, 0.6f}, {1, 4}), 100, 200);
  expect_close(abs, F({40, 10, 120, 50}, {1, 4}), 1e-4);
  expect_close(xyxy_to_normalized_yxyx(abs, 100, 200), F({0.1f, 0.2f, 0.5f, 0.6f}, {1, 4}));
  EXPECT_THROW(xywh_to_xyxy(F({1, 2, 3}, {1, 3})), Error);
}

TEST(BoxOps, AreaIouIoa) {
  auto a = F({0, 0, 2, 2, 1, 1, 1, 1}, {2, 4});  // second box is a point
  auto b = F({1, 1, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1}, {3, 4});
  expect_close(box_area(a), F({4, 0}, {2}));
  // IoU(a0, b0) = 1 / 7, IoU(a0, b1) = 1 / 4; a point never overlaps (0, not NaN).
  expect_close(box_iou_pairwise(a, b), F({1.f / 7, 0.25f, 0, 0, 0, 0}, {2, 3}));
  // IoA over the second argument's area: a0 covers all of b1.
  expect_close(box_ioa_pairwise(a, b), F({0.25f, 1, 0, 0, 0, 0}, {2, 3}));
  EXPECT_EQ(box_iou_pairwise(at::zeros({0, 4}), b).sizes(), (at::IntArrayRef{0, 3}));
  EXPECT_THROW(box_iou_pairwise(F({0, 0, NAN, 1}, {1, 4}), b), Error);
}

TEST(BoxOps, ClipAndPrune) {
  Boxes b(F({-1, -1, 2, 2, 5, 5, 6, 6}, {2, 4}));
  b.scores = F({0.5f, 0.7f}, {2});
  auto kept = clip_to_window(b, {0, 0, 4, 4}, true);
  expect_close(kept.boxes, F({0, 0, 2, 2}, {1, 4}));
  expect_close(kept.scores, F({0.5f}, {1}));
  auto all = clip_to_window(b, {0, 0, 4, 4}, false);
  expect_close(all.boxes, F({0, 0, 2, 2, 4, 4, 4, 4}, {2, 4}));

  Boxes c(F({0, 0, 2, 2, 3, 3, 5, 5, 1, 1, 4, 4}, {3, 4}));
  auto inside = prune_outside_window(c, {0, 0, 4, 4});
  EXPECT_EQ(to_vec(inside.second), (std::vector<int64_t>{0, 2}));
  Boxes d(F({0, 0, 2, 2, 4, 4, 5, 5, 3, 3, 6, 6}, {3, 4}));
  auto overlap = prune_completely_outside_window(d, {0, 0, 4, 4});
  EXPECT_EQ(to_vec(overlap.second), (std::vector<int64_t>{0, 2}));
  EXPECT_THROW(clip_boxes(c.boxes, {0, 0, -1, 4}), Error);
}

TEST(BoxOps, ScaleNormalizeFramePad) {
  auto b = F({10, 20, 30, 40}, {1, 4});
  expect_close(scale_boxes(b, 0.5, 2), F({20, 10, 60, 20}, {1, 4}));
  expect_close(to_normalized_coordinates(b, 40, 100), F({0.1f, 0.5f, 0.3f, 1}, {1, 4}));
  expect_close(to_absolute_coordinates(F({0.1f, 0.5f, 0.3f, 1}, {1, 4}), 40, 100), b, 1e-4);
  expect_close(change_coordinate_frame(b, {10, 20, 20, 30}), F({0, 0, 2, 2}, {1, 4}));
  Boxes p(F({0, 0, 1, 1, 2, 2, 3, 3}, {2, 4}));
  p.scores = F({0.5f, 0.25f}, {2});
  auto padded = pad_or_clip(p, 4);
  EXPECT_EQ(padded.second, 2);
  expect_close(padded.first.scores, F({0.5f, 0.25f, 0, 0}, {4}));
  EXPECT_EQ(padded.first.boxes.size(0), 4);
  auto clipped = pad_or_clip(p, 1);
  EXPECT_EQ(clipped.second, 1);
  expect_close(clipped.first.boxes, F({0, 0, 1, 1}, {1, 4}));
  EXPECT_EQ(to_vec(remove_small_boxes(F({0, 0, 1, 5, 0, 0, 3, 3}, {2, 4}), 2)),
            (std::vector<int64_t>{1}));
}

TEST(Anchors, EfficientDetSingleScale) {
  auto o = two_level_anchor_options();
  auto a = multilevel_anchors(o);
  ASSERT_EQ(a.size(0), 16 + 4);
  expect_close(a.slice(0, 0, 2), F({0, 0, 8, 8, 8, 0, 16, 8}, {2, 4}));
  expect_close(a.slice(0, 4, 5), F({0, 8, 8, 16}, {1, 4}));  // second row
  expect_close(a.slice(0, 16, 17), F({0, 0, 16, 16}, {1, 4}));
  auto sizes = level_sizes(o);
  EXPECT_EQ(sizes[1], (std::pair<int64_t, int64_t>{2, 2}));
}

TEST(Anchors, EfficientDetScalesAndAspects) {
  MultiLevelAnchorOptions o;
  o.min_level = o.max_level = 3;
  o.num_scales = 2;
  o.aspect_ratios = {{1.0, 1.0}, {1.4, 0.7}};
  o.anchor_scale = 4;
  o.image_height = 16;
  o.image_width = 24;  // non-square: 2 x 3 cells
  auto a = multilevel_anchors(o);
  ASSERT_EQ(a.size(0), 2 * 3 * 4);
  const float r = 16 * std::sqrt(2.0f);
  expect_close(a.slice(0, 0, 4), F({-12, -12, 20, 20, 4 - 22.4f, 4 - 11.2f, 4 + 22.4f, 4 + 11.2f,
                                    4 - r, 4 - r, 4 + r, 4 + r, 4 - 1.4f * r, 4 - 0.7f * r,
                                    4 + 1.4f * r, 4 + 0.7f * r},
                                   {4, 4}),
               1e-4);
  o.image_width = 0;
  EXPECT_THROW(multilevel_anchors(o), ConfigError);
}

// Sizes that are not multiples of the largest stride halve with ceil at every level, as ResNet's
// stride-2 convs and FPN's P6/P7 produce: 320 -> P3..P7 of 40, 20, 10, 5, 3 (torchvision's sizes).
TEST(Anchors, AnySizeHalvesWithCeil) {
  MultiLevelAnchorOptions o;
  o.num_scales = 1;
  o.aspect_ratios = {{1.0, 1.0}};
  o.image_height = 320;
  o.image_width = 200;  // 25, 13, 7, 4, 2 columns
  auto sizes = level_sizes(o);
  std::vector<std::pair<int64_t, int64_t>> expected = {{40, 25}, {20, 13}, {10, 7}, {5, 4}, {3, 2}};
  EXPECT_EQ(sizes, expected);
  auto levels = multilevel_anchors_per_level(o);
  ASSERT_EQ(levels.size(), 5u);
  for (size_t l = 0; l < 5; ++l) EXPECT_EQ(levels[l].size(0), expected[l].first * expected[l].second) << l;
  // P7 (stride 128, base 4 * 128 = 512): centres at 64 and 192 across, 64, 192, 320 down; the last
  // anchor is centred at (192, 320).
  expect_close(levels[4][5], F({192 - 256, 320 - 256, 192 + 256, 320 + 256}, {4}), 1e-4);
}

TEST(Anchors, GridAnchorGenerator) {
  GridAnchorOptions o;
  o.scales = {1.0};
  o.aspect_ratios = {1.0, 4.0};
  o.base_anchor_size = {10, 10};
  o.anchor_stride = {16, 16};
  auto a = grid_anchors(o, 1, 2);
  expect_close(a, F({-5, -5, 5, 5, -10, -2.5f, 10, 2.5f, 11, -5, 21, 5, 6, -2.5f, 26, 2.5f}, {4, 4}));
  o.scales = {0.5, 1.0};
  o.aspect_ratios = {1.0};
  o.anchor_offset = {8, 8};
  expect_close(grid_anchors(o, 1, 1), F({5.5f, 5.5f, 10.5f, 10.5f, 3, 3, 13, 13}, {2, 4}));
}

TEST(BoxCoder, HandWorkedEncode) {
  auto anchor = F({0, 0, 10, 20}, {1, 4});  // w 10, h 20, centre (5, 10)
  auto box = F({2, 4, 12, 44}, {1, 4});     // w 10, h 40, centre (7, 24)
  expect_close(encode_boxes(box, anchor), F({0.7f, 0.2f, std::log(2.0f), 0}, {1, 4}));
  BoxCoderOptions o;
  o.scale_factors = std::array<double, 4>{10, 10, 5, 5};
  expect_close(encode_boxes(box, anchor, o), F({7, 2, 5 * std::log(2.0f), 0}, {1, 4}), 1e-5);
  expect_close(decode_boxes(encode_boxes(box, anchor, o), anchor, o), box, 1e-4);
}

TEST(BoxCoder, RoundTripRandom) {
  at::manual_seed(3);
  auto xy = at::rand({200, 2}, at::kDouble) * 100;
  auto anchors = at::cat({xy, xy + 1 + at::rand({200, 2}, at::kDouble) * 50}, 1);
  auto bxy = at::rand({200, 2}, at::kDouble) * 100;
  auto boxes = at::cat({bxy, bxy + 0.5 + at::rand({200, 2}, at::kDouble) * 80}, 1);
  BoxCoderOptions o;
  o.scale_factors = std::array<double, 4>{10, 10, 5, 5};
  expect_close(decode_boxes(encode_boxes(boxes, anchors, o), anchors, o), boxes, 1e-9);
  // Batched codes [B, N, 4] broadcast over anchors.
  auto codes = encode_boxes(boxes, anchors).unsqueeze(0).repeat({2, 1, 1});
  EXPECT_EQ(decode_boxes(codes, anchors).sizes(), (at::IntArrayRef{2, 200, 4}));
  // Clamping keeps huge predictions finite.
  BoxCoderOptions c;
  c.max_log_size = std::log(1000.0 / 16);
  auto big = decode_boxes(F({0, 0, 1000, 1000}, {1, 4}), F({0, 0, 16, 16}, {1, 4}), c);
  EXPECT_TRUE(at::isfinite(big).all().item<bool>());
  expect_close(big, F({-492, -492, 508, 508}, {1, 4}), 1e-2);
  EXPECT_THROW(encode_boxes(boxes, anchors.slice(0, 0, 3)), Error);
}
