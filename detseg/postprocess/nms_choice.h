// Implements: the one place where the config's postprocess.nms picks how scored candidates become
// detections: per-class hard NMS (torchvision's batched_nms, the default), class-agnostic NMS (a
// box suppresses overlapping boxes of every class: crowded scenes of look-alike classes), or
// Gaussian soft-NMS per class (scores decay with overlap instead of dropping to zero). Every
// detector calls select_detections; Faster R-CNN, whose second stage scores each proposal for
// every class, passes the same choice to multiclass_nms through nms_options.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "detseg/ops/nms.h"

namespace detseg {

enum class NmsMethod { kPerClass, kClassAgnostic, kSoft };

struct NmsChoice {
  NmsMethod method = NmsMethod::kPerClass;
  double iou_threshold = 0.5;
  double soft_sigma = 0.5;       // Gaussian soft-NMS: score *= exp(-iou^2 / (2 sigma)), TF's convention
  double score_threshold = 0.0;  // soft-NMS drops boxes whose decayed score falls to or below this
  int64_t max_detections = 100;
};

// "per_class" | "class_agnostic" | "soft" (the config's spelling; validated there).
NmsMethod parse_nms_method(const std::string& name);

struct SelectedDetections {
  at::Tensor indices;  // int64 [K] into the candidates, by decreasing (for soft-NMS: decayed) score
  at::Tensor scores;   // [K] the detections' scores (decayed for soft-NMS)
};

// Candidates: boxes [N, 4] xyxy, scores [N], classes int64 [N]. At most choice.max_detections kept.
SelectedDetections select_detections(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& classes,
                                     const NmsChoice& choice);

// The choice as the OD API's multiclass NMS options (thresholds and limits are the caller's).
void apply_nms_choice(const NmsChoice& choice, MultiClassNmsOptions& options);

}  // namespace detseg
