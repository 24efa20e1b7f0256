// Implements: hand-worked tests of the confusion matrix, per-class IoU, both mIoU conventions,
// accuracies and the ignore label; and of the SemSegEvaluator interface.
#include <gtest/gtest.h>

#include <cmath>

#include "detseg/core/error.h"
#include "detseg/eval/seg_metrics.h"

using namespace detseg;

TEST(SegMetrics, WorkedExampleWithIgnoreLabel) {
  // Pixel 5 is ignored. Matrix rows = ground truth: (0,0)=1 (0,1)=1 (1,1)=2 (2,0)=1.
  const int32_t gt[6] = {0, 0, 1, 1, 2, 255};
  const int32_t pred[6] = {0, 1, 1, 1, 0, 2};
  ConfusionMatrix m(3, 255);
  m.add(gt, pred, 6);
  EXPECT_EQ(m.counts, (std::vector<int64_t>{1, 1, 0, 0, 2, 0, 1, 0, 0}));
  SegMetrics s = seg_metrics(m);
  EXPECT_DOUBLE_EQ(s.iou[0], 1.0 / 3);  // tp 1, union 2 + 2 - 1
  EXPECT_DOUBLE_EQ(s.iou[1], 2.0 / 3);  // tp 2, union 2 + 3 - 2
  EXPECT_DOUBLE_EQ(s.iou[2], 0.0);
  EXPECT_DOUBLE_EQ(s.mean_iou, 1.0 / 3);
  EXPECT_DOUBLE_EQ(s.pixel_accuracy, 3.0 / 5);
  EXPECT_DOUBLE_EQ(s.mean_accuracy, (0.5 + 1 + 0) / 3);
  EXPECT_DOUBLE_EQ(s.frequency_weighted_iou, 2.0 / 5 * (1.0 / 3) + 2.0 / 5 * (2.0 / 3));
}

TEST(SegMetrics, ConventionsDifferOnClassesAbsentFromGroundTruth) {
  // Class 2 is only predicted (IoU 0 with a non-empty union), class 3 appears nowhere (NaN).
  const int32_t gt[4] = {0, 0, 1, 1};
  const int32_t pred[4] = {0, 2, 1, 1};
  ConfusionMatrix m(4);
  m.add(gt, pred, 4);
  SegMetrics deeplab = seg_metrics(m);
  SegMetrics d2 = seg_metrics(m, MeanIouConvention::kPresentInGroundTruth);
  EXPECT_DOUBLE_EQ(deeplab.mean_iou, (0.5 + 1 + 0) / 3);
  EXPECT_EQ(deeplab.classes_in_mean, 3);
  EXPECT_DOUBLE_EQ(d2.mean_iou, (0.5 + 1) / 2);
  EXPECT_EQ(d2.classes_in_mean, 2);
  EXPECT_TRUE(std::isnan(deeplab.iou[3]));
  EXPECT_NE(seg_metrics_text(deeplab).find("DeepLab"), std::string::npos);
  EXPECT_NE(seg_metrics_text(d2).find("detectron2"), std::string::npos);
}

TEST(SegMetrics, BadLabelsAreErrors) {
  ConfusionMatrix m(3);
  const int32_t gt[2] = {0, 7}, pred[2] = {0, 1};
  EXPECT_THROW(m.add(gt, pred, 2), Error);
  const int32_t gt2[2] = {0, 1}, pred2[2] = {0, -1};
  EXPECT_THROW(m.add(gt2, pred2, 2), Error);
  EXPECT_THROW(ConfusionMatrix(0), ConfigError);
}

TEST(SegMetrics, EvaluatorAccumulatesOverImagesAndResets) {
  SemSegEvaluator ev(2, 255, MeanIouConvention::kNonEmptyUnion, {"bg", "fg"});
  const int32_t gt_a[4] = {0, 0, 1, 1}, pred_a[4] = {0, 0, 1, 0};
  const int32_t gt_b[2] = {1, 255}, pred_b[2] = {1, 1};
  EvalSample a;
  a.ground_truth_labels = gt_a, a.predicted_labels = pred_a, a.height = 2, a.width = 2;
  EvalSample b;
  b.ground_truth_labels = gt_b, b.predicted_labels = pred_b, b.height = 1, b.width = 2;
  ev.process(a);
  ev.process(b);
  Metrics m = ev.summarize();
  // bg: tp 2, union 3; fg: tp 2, union 3.
  EXPECT_DOUBLE_EQ(m.get("IoU/bg"), 2.0 / 3);
  EXPECT_DOUBLE_EQ(m.get("IoU/fg"), 2.0 / 3);
  EXPECT_DOUBLE_EQ(m.get("pixel_accuracy"), 4.0 / 5);
  EXPECT_EQ(m.json["per_class_iou"]["fg"].get<double>(), 2.0 / 3);
  // Sharded: b on another rank, merged, gives the same numbers.
  SemSegEvaluator rank0(2, 255, MeanIouConvention::kNonEmptyUnion, {"bg", "fg"}), rank1(2);
  rank0.process(a);
  rank1.process(b);
  rank0.merge_shard_state(rank1.shard_state());
  EXPECT_EQ(rank0.summarize().values, m.values);
  EXPECT_THROW(rank0.merge_shard_state(SemSegEvaluator(3).shard_state()), Error);
  ev.reset();
  ev.process(b);
  EXPECT_DOUBLE_EQ(ev.summarize().get("mIoU"), 1.0);
  EXPECT_THROW(ev.process(EvalSample()), Error);
}

