// Implements: the evaluator interface one eval loop drives for every metric (detectron2's
// DatasetEvaluator idea): reset(), process() once per image, summarize(). Torch-free: the loop
// converts model outputs to these plain forms at the edge (boxes to COCO xywh in original-image
// pixels, label maps to int32 rows).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "detseg/data/readers/coco.h"

namespace detseg {

// One image's predictions (and, for semantic segmentation, its ground truth).
struct EvalSample {
  int64_t image_id = 0;
  // Detections: category_id in dataset ids, bbox xywh, score; segmentation RLE for masks.
  std::vector<CocoAnnotation> detections;
  // Semantic segmentation: row-major [height, width] label maps (the caller keeps them alive).
  const int32_t* predicted_labels = nullptr;
  const int32_t* ground_truth_labels = nullptr;
  int64_t height = 0, width = 0;
};

// Named numbers in a fixed order, plus the human-readable report.
struct Metrics {
  std::vector<std::pair<std::string, double>> values;
  std::string text;
  double get(const std::string& name, double fallback = -1) const {
    for (const auto& [key, value] : values)
      if (key == name) return value;
    return fallback;
  }
};

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual void reset() = 0;
  virtual void process(const EvalSample& sample) = 0;
  virtual Metrics summarize() = 0;
};

}  // namespace detseg
