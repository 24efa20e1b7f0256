// Implements: evaluating a detector on the eval input: COCO metrics (pycocotools' numbers) and the
// mean of each loss part, one checkpoint at a time or continuously as a trainer writes them.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "detseg/config/config.h"
#include "detseg/data/readers/coco.h"
#include "detseg/eval/coco_eval.h"
#include "detseg/models/detector.h"

namespace detseg {
namespace dist {
class ProcessGroup;
}
class MetricsJsonlWriter;
class EventWriter;

struct DetectionEvalResult {
  int64_t step = 0;
  CocoEvalResult coco;
  std::vector<std::pair<std::string, double>> losses;  // means over the eval batches
  std::vector<CocoAnnotation> detections;              // COCO results form (category ids of the file)
  std::vector<std::string> category_names;             // params.category_ids order
  int64_t num_images = 0;
};

// A freshly built model with `checkpoint`'s weights (its EMA weights when it holds them).
// `step` receives the checkpoint's step when not null.
std::shared_ptr<DetectorImpl> load_detector(const PipelineConfig& config, const std::string& checkpoint,
                                            int64_t* step = nullptr);

// With a process group of several ranks, each evaluates its shard of the images (the loader's
// rank/world_size) and rank 0 merges them into one COCO evaluation; other ranks get only losses.
DetectionEvalResult evaluate_detector(const PipelineConfig& config, DetectorImpl& model,
                                      dist::ProcessGroup* group = nullptr);

// {"step", "stats": [12 numbers], "per_category_ap": {name: ap}, "losses": {...}, "num_images"}.
std::string eval_result_json(const DetectionEvalResult& result);

// The 12-line summary, then the losses, then (with per_class) the per-category table.
std::string eval_result_text(const DetectionEvalResult& result, bool per_class);

// Writes evaluations into an eval folder (model_dir/eval/): eval-<step>.json, one metrics.jsonl
// record per evaluation (split "eval": the 12 COCO stats AP..ARl and the loss means) and the same
// scalars as TensorBoard events. Used by continuous evaluation and by eval.every_steps in training.
class EvalRecorder {
 public:
  explicit EvalRecorder(const std::string& eval_dir);
  ~EvalRecorder();
  EvalRecorder(const EvalRecorder&) = delete;
  EvalRecorder& operator=(const EvalRecorder&) = delete;
  void write(const DetectionEvalResult& result);

 private:
  std::string dir_;
  std::unique_ptr<MetricsJsonlWriter> metrics_;
  std::unique_ptr<EventWriter> events_;
};

// Evaluates each checkpoint appearing in `checkpoint_dir` once, newest first when several wait;
// metrics go to checkpoint_dir/eval/ (metrics.jsonl, TensorBoard events, eval-<step>.json). Stops
// after `wait_seconds` without a new checkpoint, or once the step reaches train.num_steps.
void evaluate_continuously(const PipelineConfig& config, const std::string& checkpoint_dir, double wait_seconds);

}  // namespace detseg
