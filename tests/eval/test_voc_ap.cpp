// Implements: hand-worked PASCAL VOC AP (11-point and all-point) and VOC matching with difficult
// objects; and the Evaluator interface (COCO, VOC) giving the same numbers as the batch
// evaluations, streamed image by image and merged from shards.
#include <gtest/gtest.h>

#include "detseg/core/error.h"
#include "detseg/data/readers/coco.h"
#include "detseg/eval/coco_evaluator.h"
#include "detseg/eval/voc_ap.h"
#include "test_paths.h"

using namespace detseg;

TEST(VocAp, ElevenPointAndAllPointWorkedByHand) {
  const std::vector<double> rec = {0.5, 0.5, 1.0}, prec = {1.0, 0.5, 2.0 / 3};
  // All-point: recall 0 -> .5 at precision 1, .5 -> 1 at 2/3.
  EXPECT_DOUBLE_EQ(voc_ap(rec, prec, false), 0.5 + 0.5 * (2.0 / 3));
  // 11-point: t = 0 ... .5 see precision 1, t = .6 ... 1 see 2/3.
  EXPECT_NEAR(voc_ap(rec, prec, true), (6 + 5 * (2.0 / 3)) / 11, 1e-15);
  EXPECT_DOUBLE_EQ(voc_ap({}, {}, false), 0.0);
}

TEST(VocAp, DifficultObjectsAreNeitherHitNorMissed) {
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

TEST(CocoEvaluatorInterface, StreamingEqualsBatch) {
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

// Samples of `gt`'s images i with i % shards == shard.
std::vector<EvalSample> shard_samples(const CocoDataset& gt, const CocoDataset& dt, size_t shard, size_t shards) {
  std::vector<EvalSample> out;
  for (size_t i = shard; i < gt.images.size(); i += shards) {
    EvalSample s;
    s.image_id = gt.images[i].id;
    for (int64_t j : dt.annotations_by_image[i]) s.detections.push_back(dt.annotations[j]);
    out.push_back(s);
  }
  return out;
}

TEST(CocoEvaluatorInterface, ShardsMergeIntoTheSingleProcessResult) {
  // Three ranks: rank 0 merges the others' states; an image two shards both saw counts once.
  const std::string dir = std::string(DETSEG_SHARED_DIR) + "/coco_cases/case_small/";
  CocoDataset gt = read_coco(dir + "gt.json");
  CocoDataset dt = read_coco_results(dir + "dt.json", gt);
  CocoEvaluator single(gt), ranks[3] = {CocoEvaluator(gt), CocoEvaluator(gt), CocoEvaluator(gt)};
  for (const EvalSample& s : shard_samples(gt, dt, 0, 1)) single.process(s);
  for (size_t r = 0; r < 3; ++r)
    for (const EvalSample& s : shard_samples(gt, dt, r, 3)) ranks[r].process(s);
  ranks[2].process(shard_samples(gt, dt, 0, 3).front());  // a wrap-around repeat of rank 0's first image
  ranks[0].merge_shard_state(ranks[1].shard_state());
  ranks[0].merge_shard_state(ranks[2].shard_state());
  const Metrics a = single.summarize(), b = ranks[0].summarize();
  ASSERT_EQ(a.values.size(), 12u);
  for (size_t i = 0; i < a.values.size(); ++i) EXPECT_EQ(a.values[i], b.values[i]) << a.values[i].first;
  EXPECT_EQ(ranks[0].detections().size(), single.detections().size());
  EXPECT_EQ(a.json["per_category_ap"], b.json["per_category_ap"]);
}

void VocEvaluator_EqualsVocEvaluateOnTheImagesProcessed() {
  const std::string dir = std::string(DETSEG_SHARED_DIR) + "/coco_cases/case_small/";
  CocoDataset gt = read_coco(dir + "gt.json");
  CocoDataset dt = read_coco_results(dir + "dt.json", gt);
  // Every image: what voc_evaluate gives for the whole file, its detections in the order streamed
  // (equal scores are taken in that order).
  VocEvaluator all(gt);
  std::vector<CocoAnnotation> streamed;
  for (const EvalSample& s : shard_samples(gt, dt, 0, 1)) {
    all.process(s);
    streamed.insert(streamed.end(), s.detections.begin(), s.detections.end());
  }
  const Metrics m = all.summarize();
  const VocEvalResult want = voc_evaluate(gt, coco_results_from(streamed, gt));
  EXPECT_EQ(m.get("mAP"), want.mean_ap);
  EXPECT_EQ(m.json["mAP"].get<double>(), want.mean_ap);
  for (size_t k = 0; k < want.ap.size(); ++k)
    if (want.ap[k] >= 0) {
      const std::string name = gt.categories[static_cast<size_t>(gt.category_index.at(want.category_ids[k]))].name;
      EXPECT_EQ(m.get("AP/" + name), want.ap[k]) << name;
    }
  EXPECT_NE(m.results.find("\"image_id\""), std::string::npos);
  // Half the images, in two shards merged: the ground truth of the other images does not count
  // as missed.
  VocEvaluator first(gt), second(gt);
  std::vector<EvalSample> even = shard_samples(gt, dt, 0, 2);
  std::vector<int64_t> ids;
  for (size_t i = 0; i < even.size(); ++i) {
    (i % 2 ? second : first).process(even[i]);
    ids.push_back(even[i].image_id);
  }
  first.merge_shard_state(second.shard_state());
  VocEvalOptions half;
  half.image_ids = ids;
  std::vector<CocoAnnotation> half_streamed;  // first's images, then second's: the merged order
  for (size_t i = 0; i < even.size(); i += 2) half_streamed.insert(half_streamed.end(), even[i].detections.begin(), even[i].detections.end());
  for (size_t i = 1; i < even.size(); i += 2) half_streamed.insert(half_streamed.end(), even[i].detections.begin(), even[i].detections.end());
  const VocEvalResult want_half = voc_evaluate(gt, coco_results_from(half_streamed, gt), half);
  EXPECT_EQ(first.summarize().get("mAP"), want_half.mean_ap);
  EXPECT_NE(want_half.mean_ap, want.mean_ap);
}

