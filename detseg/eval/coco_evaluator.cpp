// Implements: CocoEvaluator (see coco_evaluator.h).
#include "detseg/eval/coco_evaluator.h"

#include "detseg/core/error.h"

namespace detseg {

CocoEvaluator::CocoEvaluator(const CocoDataset& ground_truth, CocoEvalParams params)
    : gt_(ground_truth), params_(std::move(params)) {}

void CocoEvaluator::reset() {
  detections_.clear();
  result_ = CocoEvalResult();
}

void CocoEvaluator::process(const EvalSample& sample) {
  DETSEG_CHECK(gt_.image_index.count(sample.image_id), "coco evaluator: image ", sample.image_id,
               " is not in the ground truth ", gt_.source);
  for (const CocoAnnotation& d : sample.detections) {
    DETSEG_CHECK(d.image_id == sample.image_id, "coco evaluator: a detection of image ", d.image_id,
                 " came with image ", sample.image_id);
    if (params_.iou_type == CocoIouType::kSegm)
      DETSEG_CHECK(d.segmentation.kind != CocoSegmentation::kNone,
                   "coco evaluator: segm evaluation needs a mask for every detection (image ", sample.image_id, ")");
    detections_.push_back(d);
  }
}

Metrics CocoEvaluator::summarize() {
  // coco_results_from checks ids and sizes and sets ids and areas as loadRes does.
  CocoDataset dt = coco_results_from(detections_, gt_);
  result_ = coco_evaluate(gt_, dt, params_);
  static const char* names[12] = {"AP", "AP50", "AP75", "APs", "APm", "APl",
                                  "AR1", "AR10", "AR100", "ARs", "ARm", "ARl"};
  Metrics m;
  for (int i = 0; i < 12; ++i) m.values.emplace_back(names[i], result_.stats[i]);
  for (size_t k = 0; k < result_.per_category_ap.size(); ++k) {
    const int64_t id = result_.params.category_ids[k];
    auto it = gt_.category_index.find(id);
    std::string name = it != gt_.category_index.end() ? gt_.categories[it->second].name : "";
    m.values.emplace_back("AP/" + (name.empty() ? std::to_string(id) : name), result_.per_category_ap[k]);
  }
  m.text = coco_summary_text(result_);
  return m;
}

}  // namespace detseg
