// Implements: COCO evaluation as an Evaluator: detections stream in image by image from the eval
// loop; summarize() gives the same numbers as writing a results JSON and running coco-eval over
// the images processed (pycocotools' params.imgIds), boxes and, for instance masks, masks.
#pragma once

#include <set>

#include "detseg/eval/coco_eval.h"
#include "detseg/eval/evaluator.h"

namespace detseg {

struct CocoEvaluatorOptions {
  CocoEvalParams params;  // iou_type bbox; image_ids empty: the images processed
  bool segm = false;      // also evaluate the detections' masks (each needs an RLE segmentation)
  bool metrics = true;    // false: only collect the detections (images without ground truth)
  bool per_class_text = true;  // the per-category AP / AP50 table (and AP by object size) in the text
  bool analysis = false;       // keep the matches for analysis() (the evaluation pictures)
};

class CocoEvaluator : public Evaluator {
 public:
  // `ground_truth` must outlive the evaluator.
  explicit CocoEvaluator(const CocoDataset& ground_truth, CocoEvaluatorOptions options = {});
  void reset() override;
  // Throws Error when the image or a category is not in the ground truth, or a box has negative size.
  void process(const EvalSample& sample) override;
  std::string shard_state() const override;
  void merge_shard_state(const std::string& state) override;
  // values AP, AP50, AP75, APs, APm, APl, AR1, AR10, AR100, ARs, ARm, ARl (then segm_AP, ... with
  // masks); per_class AP/<category name> and AP50/<name>; text is pycocotools' summary; json
  // "stats", "segm_stats", "per_category_ap", "per_category_ap50", "per_category_ap_by_size"
  // ({name: {small, medium, large}}, -1 where a class has no object of that size); results the
  // detections.
  Metrics summarize() override;
  // With options.analysis: the box evaluation's curves, confusion matrix and worst images.
  std::shared_ptr<EvalAnalysis> analysis() const override;

  const std::vector<CocoAnnotation>& detections() const { return detections_; }
  const std::set<int64_t>& images() const { return images_; }  // processed
  const CocoEvalResult& last_result() const { return result_; }

 private:
  const CocoDataset& gt_;
  CocoEvaluatorOptions options_;
  std::vector<CocoAnnotation> detections_;
  std::set<int64_t> images_;
  CocoEvalResult result_;
};

}  // namespace detseg
