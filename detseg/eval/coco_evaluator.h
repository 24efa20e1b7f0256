// Implements: COCO evaluation as an Evaluator: detections stream in image by image from the eval
// loop; summarize() gives the same numbers as writing a results JSON and running coco-eval.
#pragma once

#include "detseg/eval/coco_eval.h"
#include "detseg/eval/evaluator.h"

namespace detseg {

class CocoEvaluator : public Evaluator {
 public:
  // `ground_truth` must outlive the evaluator. With segm, detections need RLE segmentations.
  explicit CocoEvaluator(const CocoDataset& ground_truth, CocoEvalParams params = CocoEvalParams());
  void reset() override;
  // Throws Error when the image or a category is not in the ground truth, or a box has negative size.
  void process(const EvalSample& sample) override;
  // Metrics named AP, AP50, AP75, APs, APm, APl, AR1, AR10, AR100, ARs, ARm, ARl, then
  // "AP/<category name or id>"; text is pycocotools' summary.
  Metrics summarize() override;

  const std::vector<CocoAnnotation>& detections() const { return detections_; }
  const CocoEvalResult& last_result() const { return result_; }

 private:
  const CocoDataset& gt_;
  CocoEvalParams params_;
  std::vector<CocoAnnotation> detections_;
  CocoEvalResult result_;
};

}  // namespace detseg
