#include "detseg/postprocess/nms_choice.h"

#include <vector>

#include "detseg/core/error.h"

namespace detseg {

NmsMethod parse_nms_method(const std::string& name) {
  if (name == "per_class") return NmsMethod::kPerClass;
  if (name == "class_agnostic") return NmsMethod::kClassAgnostic;
  if (name == "soft") return NmsMethod::kSoft;
  throw ConfigError("postprocess.nms: expected per_class, class_agnostic or soft, got '" + name + "'");
}

SelectedDetections select_detections(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& classes,
                                     const NmsChoice& choice) {
  SelectedDetections out;
  if (choice.method == NmsMethod::kSoft) {
    // Soft-NMS is sequential within a class: one call per class present, then one sort by decayed score.
    SoftNmsOptions options;
    options.method = SoftNmsMethod::kGaussian;
    options.sigma = choice.soft_sigma;
    options.iou_threshold = 1.0;  // never remove outright: overlap only decays the score
    options.score_threshold = choice.score_threshold;
    std::vector<at::Tensor> picked, picked_scores;
    const at::Tensor present = std::get<0>(at::_unique(classes.cpu()));
    for (int64_t k = 0; k < present.size(0); ++k) {
      const at::Tensor members = (classes == present[k].item<int64_t>()).nonzero().view(-1);
      SoftNmsResult r = soft_nms(boxes.index_select(0, members), scores.index_select(0, members), options);
      picked.push_back(members.index_select(0, r.indices));
      picked_scores.push_back(r.scores.to(scores.dtype()));
    }
    if (picked.empty()) return {at::zeros({0}, classes.options()), scores.slice(0, 0, 0)};
    out.indices = at::cat(picked);
    out.scores = at::cat(picked_scores);
    const at::Tensor order = std::get<1>(out.scores.sort(/*stable=*/true, 0, /*descending=*/true));
    out.indices = out.indices.index_select(0, order);
    out.scores = out.scores.index_select(0, order);
  } else {
    out.indices = choice.method == NmsMethod::kClassAgnostic ? nms(boxes, scores, choice.iou_threshold)
                                                             : batched_nms(boxes, scores, classes, choice.iou_threshold);
    out.scores = scores.index_select(0, out.indices);
  }
  if (out.indices.size(0) > choice.max_detections) {
    out.indices = out.indices.slice(0, 0, choice.max_detections);
    out.scores = out.scores.slice(0, 0, choice.max_detections);
  }
  return out;
}

void apply_nms_choice(const NmsChoice& choice, MultiClassNmsOptions& options) {
  const bool soft = choice.method == NmsMethod::kSoft;
  // Soft-NMS only decays scores, as select_detections does (multiclass_nms would also remove boxes
  // above its IoU threshold: 1.0 never does).
  options.iou_threshold = soft ? 1.0 : choice.iou_threshold;
  options.class_agnostic = choice.method == NmsMethod::kClassAgnostic;
  options.soft_nms_sigma = soft ? choice.soft_sigma : 0.0;
}

}  // namespace detseg
