// Implements: regression tests for masks of very large images, found with the coco-eval fuzzer
// (fuzz/fuzz_coco_eval_pair.cpp; reproducer in fuzz/regressions/coco_eval_pair/).
#include <gtest/gtest.h>

#include "detseg/core/error.h"
#include "detseg/data/readers/coco.h"
#include "detseg/data/readers/rle.h"
#include "error_of.h"

using namespace detseg;

namespace {
using detseg::testing::error_of;
}  // namespace

// In a 10^10 x 10^10 image, polygon_problem's 8x-the-larger-side bound let coordinates of 9e9
// through, and rleFrPoly's cast of 5x that to int was undefined (UBSan); an image without a
// segmentation overflowed height * width.
TEST(RleFuzz, ImagesTooLargeForAMaskAreAnError) {
  const double xy[6] = {9e9, 9e9, 9e9 + 1, 9e9, 9e9 + 1, 9e9 + 1};
  EXPECT_EQ(error_of([&] { rle_from_polygon(xy, 3, 10000000000, 10000000000); }),
            "a 10000000000x10000000000 image has no mask: masks hold at most 2^32 - 1 pixels (uint32 run lengths)");
  CocoSegmentation none;
  EXPECT_NE(error_of([&] { segmentation_to_rle(none, 10000000000, 10000000000); }).find("has no mask"),
            std::string::npos);
  // A tall, thin image within 2^32 pixels still bounds coordinates by what int holds at 5x.
  const double far[6] = {0, 1e9, 1, 1e9, 1, 1e9 + 1};
  EXPECT_NE(error_of([&] { rle_from_polygon(far, 3, 4000000000, 1); }).find("4e8 at most"), std::string::npos);
}

// x * height took an int product: past 2^31 (a mask of more than 2^31 pixels) it overflowed.
TEST(RleFuzz, MasksAbove2To31PixelsAreRasterized) {
  const int64_t h = 50000, w = 50000;  // 2.5e9 pixels
  const double xy[8] = {49990, 49990, 49998, 49990, 49998, 49998, 49990, 49998};
  const CocoRle rle = rle_from_polygon(xy, 4, h, w);
  uint64_t total = 0;
  for (uint32_t c : rle.counts) total += c;
  EXPECT_EQ(total, static_cast<uint64_t>(h * w));
  EXPECT_EQ(rle_area(rle), 64u);  // the 8 x 8 square, as pycocotools rasterizes it
}
