// Implements: hand-worked PASCAL VOC AP (11-point and all-point) and VOC matching with difficult
// objects; and the CocoEvaluator interface giving the same numbers as the batch evaluation.
#include <gtest/gtest.h>

#include "detseg/core/error.h"
#include "detseg/data/readers/coco.h"
#include "detseg/eval/coco_evaluator.h"
#include "detseg/eval/voc_ap.h"

using namespace detseg;

void VocAp_ElevenPointAndAllPointWorkedByHand() {
  const std::vector<double> rec = {0.5, 0.5, 1.0}, prec = {1.0, 0.5, 2.0 / 3};
  // All-point: recall 0 -> .5 at precision 1, .5 -> 1 at 2/3.
  EXPECT_DOUBLE_EQ(voc_ap(rec, prec, false), 0.5 + 0.5 * (2.0 / 3));
  // 11-point: t = 0 ... .5 see precision 1, t = .6 ... 1 see 2/3.
  EXPECT_NEAR(voc_ap(rec, prec, true), (6 + 5 * (2.0 / 3)) / 11, 1e-15);
  EXPECT_DOUBLE_EQ(voc_ap({}, {}, false), 0.0);
}

void VocAp_DifficultObjectsAreNeitherHitNorMissed() {
  CocoDataset gt;
  gt.images = {{1, "", 100, 100}, {2, "", 100, 100}};
  gt.categories = {{1, "cell", ""}};
  auto box = [](int64_t id, int64_t image, double x, double y, double score, bool difficult) {
    CocoAnnotation a;
    a.id = id, a.image_id = image, a.category_id = 1;
    a.bbox[0] = x, a.bbox[1] = y, a.bbox[2] = 10, a.bbox[3] = 10;
    a.score = score;
    a.ignore = difficult;
    return a;
  };
  gt.annotations = {box(1, 1, 0, 0, 1, false), box(2, 1, 50, 50, 1, true), box(3, 2, 0, 0, 1, false)};
  gt.index();
  // On A (true positive), on the difficult B (skipped), A again (false positive); image 2 missed.
  CocoDataset dt = coco_results_from({box(0, 1, 0, 0, 0.9, false), box(0, 1, 50, 50, 0.8, false),
                                      box(0, 1, 1, 1, 0.7, false)}, gt);
  VocEvalResult r = voc_evaluate(gt, dt);
  ASSERT_EQ(r.ap.size(), 1u);
  // recall .5 .5, precision 1 .5: area .5 * 1.
  EXPECT_DOUBLE_EQ(r.ap[0], 0.5);
  EXPECT_DOUBLE_EQ(r.mean_ap, 0.5);
  VocEvalOptions v07;
  v07.use_07_metric = true;
  EXPECT_NEAR(voc_evaluate(gt, dt, v07).ap[0], 6.0 / 11, 1e-15);
}

void CocoEvaluatorInterface_StreamingEqualsBatch() {
  const std::string dir = std::string(DETSEG_SHARED_DIR) + "/coco_cases/case_small/";
  CocoDataset gt = read_coco(dir + "gt.json");
  CocoDataset dt = read_coco_results(dir + "dt.json", gt);
  CocoEvaluator ev(gt);
  ev.reset();
  for (size_t i = 0; i < gt.images.size(); ++i) {
    EvalSample s;
    s.image_id = gt.images[i].id;
    for (int64_t j : dt.annotations_by_image[i]) s.detections.push_back(dt.annotations[j]);
    ev.process(s);
  }
  Metrics m = ev.summarize();
  CocoEvalResult batch = coco_evaluate(gt, dt);
  EXPECT_EQ(m.get("AP"), batch.stats[0]);
  EXPECT_EQ(m.get("ARl"), batch.stats[11]);
  EXPECT_EQ(m.get("AP/person"), batch.per_category_ap[0]);  // category 2 is "person" here
  EXPECT_NE(m.text.find("Average Precision"), std::string::npos);
  EvalSample unknown;
  unknown.image_id = 123456789;
  EXPECT_THROW(ev.process(unknown), Error);
}

// One test program start-up loads LibTorch (seconds on a busy machine), so ctest runs one test
// per suite; each case keeps its name in the failure trace.
TEST(VocAp, AllCases) {
  {
    SCOPED_TRACE("ElevenPointAndAllPointWorkedByHand");
    VocAp_ElevenPointAndAllPointWorkedByHand();
  }
  {
    SCOPED_TRACE("DifficultObjectsAreNeitherHitNorMissed");
    VocAp_DifficultObjectsAreNeitherHitNorMissed();
  }
}
TEST(CocoEvaluatorInterface, AllCases) {
  {
    SCOPED_TRACE("StreamingEqualsBatch");
    CocoEvaluatorInterface_StreamingEqualsBatch();
  }
}
