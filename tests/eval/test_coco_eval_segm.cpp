// Implements: segm evaluation worked by hand (mask IoU differs from box IoU), the crowd rule on
// masks, and the COCO results writer read back through read_coco_results.
#include <gtest/gtest.h>

#include <filesystem>

#include "detseg/data/readers/coco.h"
#include "detseg/eval/coco_eval.h"
#include "detseg/eval/coco_results.h"
#include "detseg/data/readers/rle.h"
#include "temp_dir.h"

namespace fs = std::filesystem;
using namespace detseg;

namespace {

// One 6x6 image, category 1. The ground truth is an L: row 0 (4 pixels) and column 0 below it
// (3 pixels), 7 pixels whose box is the 4x4 square at the origin.
CocoDataset l_shape_gt(bool with_crowd) {
  CocoDataset gt;
  gt.source = "gt";
  gt.images.push_back({1, "a.jpg", 6, 6});
  gt.categories.push_back({1, "thing", ""});
  CocoAnnotation l;
  l.id = 1;
  l.image_id = 1;
  l.category_id = 1;
  l.bbox[2] = l.bbox[3] = 4;
  l.area = 7;
  l.segmentation.kind = CocoSegmentation::kPolygons;
  l.segmentation.polygons = {{0, 0, 4, 0, 4, 1, 1, 1, 1, 4, 0, 4}};
  gt.annotations.push_back(l);
  if (with_crowd) {
    CocoAnnotation crowd = l;
    crowd.id = 2;
    crowd.iscrowd = true;
    crowd.bbox[0] = 4, crowd.bbox[1] = 0, crowd.bbox[2] = 2, crowd.bbox[3] = 6;
    crowd.area = 12;
    crowd.segmentation.kind = CocoSegmentation::kRle;  // columns 4 and 5
    crowd.segmentation.rle.height = crowd.segmentation.rle.width = 6;
    crowd.segmentation.rle.counts = {24, 12};
    gt.annotations.push_back(crowd);
  }
  gt.index();
  return gt;
}

CocoAnnotation mask_detection(const std::vector<double>& polygon, double score) {
  CocoAnnotation d;
  d.image_id = 1;
  d.category_id = 1;
  d.score = score;
  d.segmentation.kind = CocoSegmentation::kRle;
  d.segmentation.rle = rle_from_polygon(polygon.data(), polygon.size() / 2, 6, 6);
  rle_to_box(d.segmentation.rle, d.bbox);
  return d;
}

}  // namespace

TEST(CocoEvalSegm, LShapeRasterizesToSevenPixels) {
  CocoDataset gt = l_shape_gt(false);
  EXPECT_EQ(rle_area(segmentation_to_rle(gt.annotations[0].segmentation, 6, 6)), 7u);
}

TEST(CocoEvalSegm, MaskIouNotBoxIouDecidesTheMatch) {
  CocoDataset gt = l_shape_gt(false);
  // A full 4x4 square: box IoU 1, mask IoU 7/16 < 0.5.
  CocoDataset square = coco_results_from({mask_detection({0, 0, 4, 0, 4, 4, 0, 4}, 0.9)}, gt);
  CocoEvalParams segm;
  segm.iou_type = CocoIouType::kSegm;
  EXPECT_NEAR(coco_evaluate(gt, square).stats[0], 1.0, 1e-15);
  EXPECT_DOUBLE_EQ(coco_evaluate(gt, square, segm).stats[0], 0.0);
  // The L itself: mask IoU 1.
  CocoDataset l = coco_results_from({mask_detection({0, 0, 4, 0, 4, 1, 1, 1, 1, 4, 0, 4}, 0.9)}, gt);
  EXPECT_NEAR(coco_evaluate(gt, l, segm).stats[0], 1.0, 1e-15);
}

TEST(CocoEvalSegm, DetectionOnCrowdMaskIsIgnored) {
  CocoDataset gt = l_shape_gt(true);
  // The best-scored detection covers column 5 rows 0-3, inside the crowd mask (crowd IoU 1): it is
  // ignored, so the L found second still gives AP 1.
  CocoDataset dt = coco_results_from({mask_detection({5, 0, 6, 0, 6, 4, 5, 4}, 0.95),
                                      mask_detection({0, 0, 4, 0, 4, 1, 1, 1, 1, 4, 0, 4}, 0.9)},
                                     gt);
  CocoEvalParams segm;
  segm.iou_type = CocoIouType::kSegm;
  EXPECT_NEAR(coco_evaluate(gt, dt, segm).stats[0], 1.0, 1e-15);
}

TEST(CocoEvalSegm, ResultsWriterRoundTrip) {
  CocoDataset gt = l_shape_gt(false);
  std::vector<CocoAnnotation> dets = {mask_detection({0, 0, 4, 0, 4, 1, 1, 1, 1, 4, 0, 4}, 0.9),
                                      mask_detection({2, 2, 5, 2, 5, 5, 2, 5}, 0.25)};
  const detseg::testing::TempDir path_temp("test_results");
  const std::string path = (path_temp / "test_results.json").string();
  write_coco_results(dets, path);
  CocoDataset back = read_coco_results(path, gt);
  ASSERT_EQ(back.annotations.size(), 2u);
  for (size_t i = 0; i < dets.size(); ++i) {
    EXPECT_EQ(back.annotations[i].segmentation.rle.counts, dets[i].segmentation.rle.counts);
    EXPECT_EQ(back.annotations[i].score, dets[i].score);
    for (int k = 0; k < 4; ++k) EXPECT_EQ(back.annotations[i].bbox[k], dets[i].bbox[k]);
    // The file has boxes, so (as pycocotools' loadRes) the area is the box's.
    EXPECT_EQ(back.annotations[i].area, dets[i].bbox[2] * dets[i].bbox[3]);
  }
  CocoEvalParams segm;
  segm.iou_type = CocoIouType::kSegm;
  EXPECT_NEAR(coco_evaluate(gt, back, segm).stats[1], 1.0, 1e-15);
}

