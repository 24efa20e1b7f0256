// Implements: tests of the COCO mask API (eval/rle.cpp) with masks worked out by hand, plus
// consistency checks on coco128's crowd masks.
#include <gtest/gtest.h>

#include "detseg/core/error.h"
#include "detseg/data/readers/coco.h"
#include "detseg/data/readers/rle.h"
#include "test_paths.h"

using namespace detseg;

namespace {

CocoRle rle(int64_t h, int64_t w, std::vector<uint32_t> counts) {
  CocoRle r;
  r.height = h;
  r.width = w;
  r.counts = std::move(counts);
  return r;
}

std::vector<double> box_of(const CocoRle& r) {
  std::vector<double> b(4);
  rle_to_box(r, b.data());
  return b;
}

}  // namespace

TEST(Rle, EncodeDecodeColumnMajor) {
  // h=3, w=2, column-major pixels 0,1,1 | 1,0,0: runs 1 zero, 3 ones, 2 zeros.
  const uint8_t mask[6] = {0, 1, 1, 1, 0, 0};
  CocoRle r = rle_encode(mask, 3, 2);
  EXPECT_EQ(r.counts, (std::vector<uint32_t>{1, 3, 2}));
  uint8_t back[6];
  rle_decode(r, back);
  EXPECT_EQ(std::vector<uint8_t>(back, back + 6), std::vector<uint8_t>(mask, mask + 6));
  // A mask starting with foreground has a leading zero run.
  const uint8_t full[4] = {1, 1, 1, 1};
  EXPECT_EQ(rle_encode(full, 2, 2).counts, (std::vector<uint32_t>{0, 4}));
  // Row-major: the same mask seen as an image [[0, 1], [1, 0], [1, 0]].
  const uint8_t image[6] = {0, 1, 1, 0, 1, 0};
  EXPECT_EQ(rle_encode_row_major(image, 3, 2).counts, (std::vector<uint32_t>{1, 3, 2}));
  uint8_t image_back[6];
  rle_decode_row_major(r, image_back);
  EXPECT_EQ(std::vector<uint8_t>(image_back, image_back + 6), std::vector<uint8_t>(image, image + 6));
}

TEST(Rle, CompressedStringWorkedByHand) {
  // 0 -> "0"; 100 = 3*32 + 4 -> "T3"; 50 = 32 + 18 (bit 4 set, so continue) -> "b1";
  // 4th count is stored as 90 - 100 = -10 -> low 5 bits 22 -> "F".
  CocoRle r = rle(10, 24, {0, 100, 50, 90});
  EXPECT_EQ(rle_to_string(r), "0T3b1F");
  EXPECT_EQ(rle_from_string("0T3b1F", 10, 24).counts, r.counts);
  EXPECT_EQ(rle_to_string(rle(3, 2, {1, 3, 2})), "132");
  EXPECT_THROW(rle_from_string("0T3b1F~", 10, 24), Error);  // '~' is outside '0'..'o'
  EXPECT_THROW(rle_from_string("T", 10, 24), Error);        // continuation bit with nothing after
}

TEST(Rle, AreaBoxAndIouWithCrowdRule) {
  // 6x6 image; A covers columns 0-3, rows 0-3; B covers columns 2-5, rows 0-3.
  CocoRle a = rle(6, 6, {0, 4, 2, 4, 2, 4, 2, 4, 14});
  CocoRle b = rle(6, 6, {12, 4, 2, 4, 2, 4, 2, 4, 2});
  EXPECT_EQ(rle_area(a), 16u);
  EXPECT_EQ(box_of(a), (std::vector<double>{0, 0, 4, 4}));
  EXPECT_EQ(box_of(b), (std::vector<double>{2, 0, 4, 4}));
  EXPECT_DOUBLE_EQ(rle_iou(a, b, false), 8.0 / 24.0);
  EXPECT_DOUBLE_EQ(rle_iou(a, b, true), 8.0 / 16.0);  // crowd: intersection / detection area
  EXPECT_DOUBLE_EQ(rle_iou(a, rle(6, 6, {36}), false), 0.0);
  EXPECT_DOUBLE_EQ(rle_iou(a, rle(5, 6, {30}), false), -1.0);  // sizes differ
  CocoRle u = rle_merge({a, b});
  EXPECT_EQ(rle_area(u), 24u);
  EXPECT_EQ(box_of(u), (std::vector<double>{0, 0, 6, 4}));
  EXPECT_EQ(rle_area(rle_merge({a, b}, true)), 8u);
  // A run that wraps from one column into the next spans the full height in the box.
  EXPECT_EQ(box_of(rle(6, 6, {5, 2, 29})), (std::vector<double>{0, 0, 2, 6}));
  EXPECT_EQ(box_of(rle(6, 6, {36})), (std::vector<double>{0, 0, 0, 0}));
  // Box IoU, same formula as bbIou.
  const double da[4] = {0, 0, 4, 4}, gb[4] = {2, 0, 4, 4};
  EXPECT_DOUBLE_EQ(box_iou_coco(da, gb, false), 8.0 / 24.0);
  EXPECT_DOUBLE_EQ(box_iou_coco(da, gb, true), 8.0 / 16.0);
}

TEST(Rle, PolygonRasterization) {
  // An axis-aligned square with integer corners covers exactly the pixels inside it.
  const double square[8] = {0, 0, 4, 0, 4, 4, 0, 4};
  CocoRle s = rle_from_polygon(square, 4, 6, 6);
  EXPECT_EQ(s.counts, (std::vector<uint32_t>{0, 4, 2, 4, 2, 4, 2, 4, 14}));
  const double xywh[4] = {1, 2, 3, 2};
  CocoRle b = rle_from_box(xywh, 6, 6);
  EXPECT_EQ(rle_area(b), 6u);
  EXPECT_EQ(box_of(b), (std::vector<double>{1, 2, 3, 2}));
  // A polygon past the image border is clipped to it.
  const double big[8] = {-5, -5, 20, -5, 20, 20, -5, 20};
  EXPECT_EQ(rle_area(rle_from_polygon(big, 4, 6, 6)), 36u);
  // Two polygons of one segmentation are merged; a first list of 4 numbers is a box.
  CocoSegmentation seg;
  seg.kind = CocoSegmentation::kPolygons;
  seg.polygons = {{0, 0, 4, 0, 4, 4, 0, 4}, {2, 0, 6, 0, 6, 4, 2, 4}};
  EXPECT_EQ(rle_area(segmentation_to_rle(seg, 6, 6)), 24u);
  seg.polygons = {{1, 2, 3, 2}};
  EXPECT_EQ(segmentation_to_rle(seg, 6, 6).counts, b.counts);
  // A right triangle (0,0) (4,0) (0,4): between the 8 pixels fully inside and the 16 of its box.
  const double triangle[6] = {0, 0, 4, 0, 0, 4};
  const uint64_t area = rle_area(rle_from_polygon(triangle, 3, 6, 6));
  EXPECT_GE(area, 6u);
  EXPECT_LE(area, 10u);
}

TEST(Rle, Coco128CrowdMasksRoundTripAndBoxes) {
  CocoDataset data = read_coco(std::string(DETSEG_SHARED_DIR) +
                               "/data/coco128/annotations/instances_val2017.json");
  int checked = 0;
  for (const auto& a : data.annotations) {
    if (a.segmentation.kind != CocoSegmentation::kRle) continue;
    const CocoRle& r = a.segmentation.rle;
    EXPECT_EQ(rle_from_string(rle_to_string(r), r.height, r.width).counts, r.counts);
    std::vector<uint8_t> mask(static_cast<size_t>(r.height * r.width));
    rle_decode(r, mask.data());
    CocoRle again = rle_encode(mask.data(), r.height, r.width);
    EXPECT_EQ(rle_area(again), rle_area(r));
    // COCO's crowd boxes agree with toBbox within a pixel (some widths are one less).
    std::vector<double> box = box_of(r);
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(box[k], a.bbox[k], 1.0) << "annotation " << a.id;
    ++checked;
  }
  EXPECT_EQ(checked, 10);
}

// A vertex repeated back to back (common in hand-drawn COCO polygons) is a zero-length edge: the
// mask is the same as without the repeat (pycocotools divides 0 by 0 there; found by fuzzing,
// fuzz/regressions/coco_eval_pair/repeated_polygon_vertex).
TEST(Rle, RepeatedPolygonVertexIsAZeroLengthEdge) {
  const double square[] = {2, 1, 12.5, 1, 12.5, 9, 2, 9};
  const double repeated[] = {2, 1, 12.5, 1, 12.5, 1, 12.5, 9, 2, 9, 2, 9};
  const CocoRle a = rle_from_polygon(square, 4, 20, 30), b = rle_from_polygon(repeated, 6, 20, 30);
  EXPECT_EQ(a.counts, b.counts);
  EXPECT_GT(rle_area(a), 0);
  const double point[] = {5, 5, 5, 5};
  EXPECT_EQ(rle_area(rle_from_polygon(point, 2, 20, 30)), rle_area(rle_from_polygon(point, 1, 20, 30)));
}
