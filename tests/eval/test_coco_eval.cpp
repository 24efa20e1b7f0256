// Implements: hand-worked COCO evaluation cases: the crowd rule, ignored detections, score ties
// across and within images, empty detections, categories without ground truth or detections,
// class-agnostic mode, custom thresholds, and the summary text format.
#include <gtest/gtest.h>

#include "detseg/data/readers/coco.h"
#include "detseg/eval/coco_eval.h"

using namespace detseg;

namespace {

struct Box {
  int64_t image, category;
  double x, y, w, h;
  double score = 1;  // detections
  bool crowd = false;
};

CocoDataset make_gt(std::vector<int64_t> image_ids, std::vector<int64_t> category_ids, std::vector<Box> boxes) {
  CocoDataset gt;
  gt.source = "gt";
  for (int64_t id : image_ids) gt.images.push_back({id, "", 100, 100});
  for (int64_t id : category_ids) gt.categories.push_back({id, "", ""});
  int64_t next = 1;
  for (const Box& b : boxes) {
    CocoAnnotation a;
    a.id = next++;
    a.image_id = b.image;
    a.category_id = b.category;
    a.bbox[0] = b.x, a.bbox[1] = b.y, a.bbox[2] = b.w, a.bbox[3] = b.h;
    a.area = b.w * b.h;
    a.iscrowd = b.crowd;
    gt.annotations.push_back(a);
  }
  gt.index();
  return gt;
}

CocoDataset make_dt(const CocoDataset& gt, std::vector<Box> boxes) {
  std::vector<CocoAnnotation> dets;
  for (const Box& b : boxes) {
    CocoAnnotation a;
    a.image_id = b.image;
    a.category_id = b.category;
    a.bbox[0] = b.x, a.bbox[1] = b.y, a.bbox[2] = b.w, a.bbox[3] = b.h;
    a.score = b.score;
    dets.push_back(a);
  }
  return coco_results_from(dets, gt);
}

// AP over the 101 recall points when precision is `high` up to recall `cut` and `low` after.
double two_level_ap(double high, double cut, double low) {
  int above = 0;
  for (int r = 0; r <= 100; ++r) above += r / 100.0 <= cut + 1e-12;
  return (above * high + (101 - above) * low) / 101;
}

}  // namespace

TEST(CocoEval, DetectionInsideCrowdIsIgnoredNotFalsePositive) {
  // The crowd box scores highest. Counted as a false positive it would halve AP; pycocotools
  // matches it to the crowd region (IoU = intersection / detection area = 1) and ignores it.
  CocoDataset gt = make_gt({1}, {1}, {{1, 1, 0, 0, 10, 10}, {1, 1, 50, 50, 20, 20, 1, true}});
  CocoDataset dt = make_dt(gt, {{1, 1, 55, 55, 10, 10, 0.95}, {1, 1, 0, 0, 10, 10, 0.9}, {1, 1, 20, 20, 10, 10, 0.7}});
  CocoEvalResult r = coco_evaluate(gt, dt);
  // AR@1 is 0: with one detection per image only the (ignored) crowd one is kept.
  const double expected[12] = {1, 1, 1, 1, -1, -1, 0, 1, 1, 1, -1, -1};
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(r.stats[i], expected[i], 1e-15) << "stat " << i;
}

TEST(CocoEval, ScoreTiesFollowSortedImageIdsThenFileOrder) {
  // Images 20 and 10 (file order), a tie at 0.5: the true positive in image 10 comes first because
  // pycocotools concatenates images in sorted id order before its stable sort.
  CocoDataset gt = make_gt({20, 10}, {1}, {{10, 1, 0, 0, 10, 10}, {20, 1, 0, 0, 10, 10}});
  CocoDataset dt = make_dt(gt, {{20, 1, 50, 50, 10, 10, 0.5},   // false positive
                                {10, 1, 0, 0, 10, 10, 0.5},     // true positive
                                {20, 1, 0, 0, 10, 10, 0.4}});   // true positive
  CocoEvalResult r = coco_evaluate(gt, dt);
  // TP, FP, TP: precision 1 up to recall 0.5, then 2/3.
  EXPECT_NEAR(r.stats[0], two_level_ap(1, 0.5, 2 / (3 + 2.220446049250313e-16)), 1e-12);
  EXPECT_NEAR(r.stats[0], 0.83498349834983498, 1e-9);
}

TEST(CocoEval, TiesInsideAnImageKeepFileOrderForMaxDets) {
  // Two detections with the same score: with maxDets 1 only the first in file order counts.
  CocoDataset gt = make_gt({1}, {1}, {{1, 1, 0, 0, 10, 10}});
  CocoDataset fp_first = make_dt(gt, {{1, 1, 60, 60, 10, 10, 0.6}, {1, 1, 0, 0, 10, 10, 0.6}});
  CocoDataset tp_first = make_dt(gt, {{1, 1, 0, 0, 10, 10, 0.6}, {1, 1, 60, 60, 10, 10, 0.6}});
  EXPECT_DOUBLE_EQ(coco_evaluate(gt, fp_first).stats[6], 0.0);  // AR@1
  EXPECT_DOUBLE_EQ(coco_evaluate(gt, tp_first).stats[6], 1.0);
  EXPECT_DOUBLE_EQ(coco_evaluate(gt, fp_first).stats[8], 1.0);  // AR@100
}

TEST(CocoEval, EmptyDetectionsGiveZeroOrMinusOne) {
  CocoDataset gt = make_gt({1, 2}, {1, 2}, {{1, 1, 0, 0, 10, 10}, {2, 2, 0, 0, 50, 50}});
  CocoDataset dt = make_dt(gt, {});
  CocoEvalResult r = coco_evaluate(gt, dt);
  // Small and medium objects exist, large ones do not.
  const double expected[12] = {0, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0, -1};
  for (int i = 0; i < 12; ++i) EXPECT_DOUBLE_EQ(r.stats[i], expected[i]) << "stat " << i;
  EXPECT_EQ(r.per_category_ap, (std::vector<double>{0, 0}));
}

TEST(CocoEval, CategoryWithoutGroundTruthIsMinusOneAndLeftOutOfTheMean) {
  // Category 7 has only a detection (AP -1, not averaged); category 3 has ground truth but no
  // detection (AP 0, averaged); category 5 is perfect.
  CocoDataset gt = make_gt({1}, {5, 3, 7}, {{1, 5, 0, 0, 10, 10}, {1, 3, 40, 40, 10, 10}});
  CocoDataset dt = make_dt(gt, {{1, 5, 0, 0, 10, 10, 0.9}, {1, 7, 70, 70, 10, 10, 0.8}});
  CocoEvalResult r = coco_evaluate(gt, dt);
  ASSERT_EQ(r.params.category_ids, (std::vector<int64_t>{3, 5, 7}));
  // pycocotools' precision is tp / (tp + fp + eps): a perfect AP is 1 - 2^-52, not 1.
  const double perfect = 1 / (1 + 2.220446049250313e-16);
  EXPECT_EQ(r.per_category_ap, (std::vector<double>{0, perfect, -1}));
  ASSERT_EQ(r.per_category_ap50.size(), 3u);
  EXPECT_EQ(r.per_category_ap50[0], 0.0);
  EXPECT_NEAR(r.per_category_ap50[1], 1.0, 1e-15);
  EXPECT_EQ(r.per_category_ap50[2], -1.0);
  EXPECT_DOUBLE_EQ(r.stats[0], 0.5);
}

TEST(CocoEval, ClassAgnosticMatchesAcrossCategories) {
  CocoDataset gt = make_gt({1}, {1, 2}, {{1, 1, 0, 0, 10, 10}});
  CocoDataset dt = make_dt(gt, {{1, 2, 0, 0, 10, 10, 0.9}});
  EXPECT_DOUBLE_EQ(coco_evaluate(gt, dt).stats[0], 0.0);
  CocoEvalParams agnostic;
  agnostic.use_categories = false;
  CocoEvalResult r = coco_evaluate(gt, dt, agnostic);
  EXPECT_DOUBLE_EQ(r.stats[0], 1.0);
  EXPECT_EQ(r.K, 1);
  EXPECT_TRUE(r.per_category_ap.empty());
}

TEST(CocoEval, IouThresholdEdgesAndCustomParams) {
  // IoU exactly 0.5 (10x10 box against a 10x20 box over it) counts at 0.50 and not at 0.55.
  CocoDataset gt = make_gt({1}, {1}, {{1, 1, 0, 0, 10, 20}});
  CocoDataset dt = make_dt(gt, {{1, 1, 0, 0, 10, 10, 0.9}});
  CocoEvalResult r = coco_evaluate(gt, dt);
  EXPECT_DOUBLE_EQ(r.stats[1], 1.0);   // AP50
  EXPECT_DOUBLE_EQ(r.stats[2], 0.0);   // AP75
  EXPECT_DOUBLE_EQ(r.stats[0], 0.1);   // 1 of 10 thresholds
  CocoEvalParams custom;
  custom.iou_thresholds = {0.5};
  custom.area_ranges = {{0, 1e10}};
  custom.area_labels = {"all"};
  custom.max_dets = {100, 1, 10};  // sorted as pycocotools does
  CocoEvalResult c = coco_evaluate(gt, dt, custom);
  EXPECT_EQ(c.params.max_dets, (std::vector<int64_t>{1, 10, 100}));
  EXPECT_DOUBLE_EQ(c.stats[0], 1.0);
  EXPECT_DOUBLE_EQ(c.stats[2], -1.0);  // no 0.75 threshold
  EXPECT_DOUBLE_EQ(c.stats[3], -1.0);  // no "small" range
  // Restricting to image ids without that image: nothing to evaluate.
  CocoEvalParams other_images;
  other_images.image_ids = {99};
  EXPECT_DOUBLE_EQ(coco_evaluate(gt, dt, other_images).stats[0], -1.0);
}

TEST(CocoEval, IgnoreFieldIsOverriddenByIscrowdAsInPycocotools) {
  CocoDataset gt = make_gt({1}, {1}, {{1, 1, 0, 0, 10, 10}});
  gt.annotations[0].ignore = true;  // pycocotools sets ignore = iscrowd, dropping this flag
  CocoDataset dt = make_dt(gt, {});
  EXPECT_DOUBLE_EQ(coco_evaluate(gt, dt).stats[0], 0.0);  // still counted: AP 0, not -1
}

TEST(CocoEval, SummaryTextHasPycocotoolsFormat) {
  CocoDataset gt = make_gt({1}, {1}, {{1, 1, 0, 0, 10, 10}});
  CocoDataset dt = make_dt(gt, {{1, 1, 0, 0, 10, 10, 0.9}});
  std::string text = coco_summary_text(coco_evaluate(gt, dt));
  EXPECT_NE(text.find(" Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 1.000\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find(" Average Precision  (AP) @[ IoU=0.50      | area=   all | maxDets=100 ] = 1.000\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find(" Average Recall     (AR) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = -1.000\n"),
            std::string::npos) << text;
}

TEST(CocoEval, NumpyHelpersMatchNumpy) {
  // numpy.linspace(.5, .95, 10)[5] is 0.75 exactly, and [9] is 0.95 (the endpoint is set).
  auto t = numpy_linspace(.5, .95, 10);
  EXPECT_EQ(t[5], 0.75);
  EXPECT_EQ(t[9], 0.95);
  EXPECT_EQ(numpy_linspace(0, 1, 101)[7], 7 * 0.01);
  // Pairwise summation differs from a running sum: numpy.sum([1e16] + [1.0] * 15) is 1e16 + 14.
  std::vector<double> v(16, 1.0);
  v[0] = 1e16;
  double running = 0;
  for (double x : v) running += x;
  EXPECT_EQ(running, 1e16);
  EXPECT_EQ(numpy_sum(v.data(), v.size()), 1e16 + 14);
}

TEST(CocoEval, HugeAndNegativeIdsWork) {
  // Category ids too far apart for the dense lookup table, and a negative image id.
  CocoDataset gt = make_gt({-3, 7}, {5, 1000000000000}, {{-3, 1000000000000, 0, 0, 10, 10}, {7, 5, 0, 0, 10, 10}});
  CocoDataset dt = make_dt(gt, {{-3, 1000000000000, 0, 0, 10, 10, 0.9}, {7, 5, 50, 50, 10, 10, 0.9}});
  CocoEvalResult r = coco_evaluate(gt, dt);
  ASSERT_EQ(r.params.image_ids, (std::vector<int64_t>{-3, 7}));
  ASSERT_EQ(r.per_category_ap.size(), 2u);
  EXPECT_DOUBLE_EQ(r.per_category_ap[0], 0.0);  // category 5: the only detection misses
  EXPECT_NEAR(r.per_category_ap[1], 1.0, 1e-15);
}

TEST(CocoEval, PerCategoryAp50CountsLooseBoxesThatApMostlyRejects) {
  // Category 1: a detection with IoU 0.64 with its box (8x8 of 10x10) is a hit at 0.5..0.6 only:
  // AP50 = 1 (less pycocotools' eps), AP = 3/10 of that. Category 2: perfect at every threshold.
  CocoDataset gt = make_gt({1}, {1, 2}, {{1, 1, 0, 0, 10, 10}, {1, 2, 50, 50, 10, 10}});
  CocoDataset dt = make_dt(gt, {{1, 1, 0, 0, 8, 8, 0.9}, {1, 2, 50, 50, 10, 10, 0.8}});
  CocoEvalResult r = coco_evaluate(gt, dt);
  ASSERT_EQ(r.per_category_ap50.size(), 2u);
  EXPECT_NEAR(r.per_category_ap50[0], 1.0, 1e-15);
  EXPECT_NEAR(r.per_category_ap[0], 0.3, 1e-12);
  EXPECT_NEAR(r.per_category_ap50[1], 1.0, 1e-15);
  // The mean over categories of AP50 is stats[1], as pycocotools reports it.
  EXPECT_NEAR((r.per_category_ap50[0] + r.per_category_ap50[1]) / 2, r.stats[1], 1e-15);
}

