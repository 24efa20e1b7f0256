// Implements: PASCAL VOC detection AP (the devkit's voc_eval semantics): greedy matching by score
// at an IoU threshold with "difficult" ground truth neither hit nor missed, and AP as the 11-point
// (VOC2007) or all-point (VOC2010+) area under the interpolated precision/recall curve.
#pragma once

#include <cstdint>
#include <vector>

#include "detseg/data/readers/coco.h"
#include "detseg/eval/coco_evaluator.h"
#include "detseg/eval/evaluator.h"

namespace detseg {

// AP of a precision/recall curve (recall ascending). 11-point: mean over t = 0, .1, ..., 1 of the
// best precision at recall >= t. All-point: area under the monotone precision envelope.
double voc_ap(const std::vector<double>& recall, const std::vector<double>& precision, bool use_07_metric);

struct VocEvalOptions {
  double iou_threshold = 0.5;
  bool use_07_metric = false;  // 11-point interpolation (VOC2007 test)
  bool plus_one = true;        // the devkit's inclusive-pixel box sizes (x2 - x1 + 1)
  std::vector<int64_t> image_ids;  // ground truth of these images only; empty: every image
};

struct VocEvalResult {
  std::vector<int64_t> category_ids;  // ground truth's categories, in its order
  std::vector<double> ap;             // per category; -1 where it has no non-difficult ground truth
  double mean_ap = -1;                // over categories with ap >= 0
};

// Ground truth "difficult" is CocoAnnotation::ignore (the VOC reader maps it there).
VocEvalResult voc_evaluate(const CocoDataset& gt, const CocoDataset& dt, const VocEvalOptions& options = {});

// VOC AP as an Evaluator (eval.metric: voc): detections stream in as for CocoEvaluator; the ground
// truth is that of the images processed. values mAP; per_class AP/<category name> (categories
// without non-difficult ground truth left out); json "mAP", "per_category_ap", "iou_threshold",
// "use_07_metric"; results the detections in COCO results form.
class VocEvaluator : public Evaluator {
 public:
  // `ground_truth` must outlive the evaluator.
  VocEvaluator(const CocoDataset& ground_truth, VocEvalOptions options = {});
  void reset() override;
  void process(const EvalSample& sample) override;
  std::string shard_state() const override;
  void merge_shard_state(const std::string& state) override;
  Metrics summarize() override;

 private:
  CocoEvaluator collected_;  // the same detections, collected and merged as COCO's
  const CocoDataset& gt_;
  VocEvalOptions options_;
};

}  // namespace detseg
