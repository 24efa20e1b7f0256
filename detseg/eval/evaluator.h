// Implements: the evaluator interface the one eval loop (engine/evaluate) drives for every metric
// (detectron2's DatasetEvaluator idea): reset(), process() once per image, summarize(). A sharded
// evaluation hands each rank's shard_state() to rank 0, which merges them before summarizing.
// Torch-free: the loop converts model outputs to these plain forms at the edge (boxes to COCO xywh
// in original-image pixels, label maps to int32 rows).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "detseg/data/readers/coco.h"

namespace detseg {

struct EvalAnalysis;  // eval_analysis.h: the numbers behind the evaluation pictures

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

struct Metrics {
  // The headline numbers, in a fixed order: logged to metrics.jsonl and TensorBoard.
  std::vector<std::pair<std::string, double>> values;
  // Per class ("AP/<name>", "IoU/<name>"): in the text and the JSON, not logged.
  std::vector<std::pair<std::string, double>> per_class;
  std::string text;             // the human-readable report
  nlohmann::ordered_json json;  // the evaluator's fields of eval-<step>.json
  std::string results;          // detections in COCO results form (a JSON array); empty for others
  double get(const std::string& name, double fallback = -1) const {
    for (const auto* list : {&values, &per_class})
      for (const auto& [key, value] : *list)
        if (key == name) return value;
    return fallback;
  }
};

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual void reset() = 0;
  virtual void process(const EvalSample& sample) = 0;
  // What this process has seen, as bytes; merge_shard_state adds another process's.
  virtual std::string shard_state() const = 0;
  virtual void merge_shard_state(const std::string& state) = 0;
  virtual Metrics summarize() = 0;
  // After summarize(): the numbers behind the evaluation pictures (PR curves, confusion matrices,
  // ...), or null when this evaluator draws none or was not asked to keep them.
  virtual std::shared_ptr<EvalAnalysis> analysis() const { return nullptr; }
};

}  // namespace detseg
