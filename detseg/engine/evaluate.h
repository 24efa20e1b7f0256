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
#include "detseg/eval/seg_metrics.h"
#include "detseg/models/detector.h"
#include "detseg/models/segmenter.h"

namespace detseg {
namespace dist {
class ProcessGroup;
}
class MetricsJsonlWriter;
class EventWriter;

struct DetectionEvalResult {
  int64_t step = 0;
  CocoEvalResult coco;
  bool has_segm = false;  // the model predicts instance masks: `segm` holds their COCO evaluation
  CocoEvalResult segm;
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
// With `metrics` false only the detections are collected (a results file for images without ground
// truth, e.g. COCO test-dev); `coco`/`segm` stay empty.
DetectionEvalResult evaluate_detector(const PipelineConfig& config, DetectorImpl& model,
                                      dist::ProcessGroup* group = nullptr, bool metrics = true);

// {"step", "stats": [12 numbers], "per_category_ap": {name: ap}, "losses": {...}, "num_images"}, plus
// "segm_stats": [12 numbers] for models with masks.
std::string eval_result_json(const DetectionEvalResult& result);

// The 12-line summary, then the losses, then (with per_class) the per-category table.
std::string eval_result_text(const DetectionEvalResult& result, bool per_class);

// ---- semantic segmentation

struct SegmentationEvalResult {
  int64_t step = 0;
  SegMetrics metrics;                                  // mIoU, per-class IoU, pixel accuracy, ...
  // Loss means over the images (each batch's loss counted once per image in it).
  std::vector<std::pair<std::string, double>> losses;
  std::vector<std::string> class_names;
  int64_t num_images = 0;
};

std::shared_ptr<SegmenterImpl> load_segmenter(const PipelineConfig& config, const std::string& checkpoint,
                                              int64_t* step = nullptr);

// Full-resolution label maps (the model's eval scales and flips) against eval_input's label maps.
// Sharded as evaluate_detector: rank 0 gets the merged confusion matrix, other ranks only losses.
SegmentationEvalResult evaluate_segmenter(const PipelineConfig& config, SegmenterImpl& model,
                                          dist::ProcessGroup* group = nullptr);

// {"step", "num_images", "mIoU", "pixel_accuracy", "mean_accuracy", "fwIoU", "per_class_iou": {name: iou
// or null}, "losses": {...}}.
std::string seg_eval_result_json(const SegmentationEvalResult& result);
// mIoU, accuracies, per-class IoU, then the losses.
std::string seg_eval_result_text(const SegmentationEvalResult& result);

// ---- either kind of model

// What `detseg eval`, `detseg train` and continuous evaluation print and store of one checkpoint.
struct EvalReport {
  std::string set_name;  // "" for eval_input, else the eval_inputs name (or "train" for eval.on_train)
  int64_t step = 0;
  int64_t num_images = 0;
  std::string text;  // human summary
  std::string json;  // the kind's JSON result
  // Detection models: every detection in COCO results format ([{image_id, category_id, bbox, score,
  // segmentation?}] with the data set's ids), the file test-dev submissions and coco-eval take.
  std::string detections;
  int64_t num_detections = 0;
  std::vector<std::pair<std::string, double>> scalars;  // logged to metrics.jsonl / TensorBoard
  bool main_process = true;  // false on ranks > 0 of a sharded evaluation (text/json empty)
};

// Evaluates a model of either kind on eval_input (sharded over `group`'s ranks); `model` is left
// in eval mode. `step` labels the report (the checkpoint's or the training step).
EvalReport evaluate_model(const PipelineConfig& config, ModelImpl& model, int64_t step,
                          dist::ProcessGroup* group = nullptr, bool per_class = true, bool metrics = true);

// The evaluation sets of a config, in order: eval_input (name "") when it has annotations, each
// eval_inputs entry, and with eval.on_train N the first N train_input images as "train".
struct EvalSet {
  std::string name;
  InputConfig input;
};
std::vector<EvalSet> evaluation_sets(const PipelineConfig& config);

// evaluate_model on each evaluation set (the same model, one report per set).
std::vector<EvalReport> evaluate_model_on_sets(const PipelineConfig& config, ModelImpl& model, int64_t step,
                                               dist::ProcessGroup* group = nullptr, bool per_class = true,
                                               bool metrics = true);

// The reports' texts, each set's under a "set <name>:" line when it has a name.
std::string eval_reports_text(const std::vector<EvalReport>& reports);

// Loads `checkpoint` (once) and evaluates it on every evaluation set.
std::vector<EvalReport> evaluate_checkpoint_on_sets(const PipelineConfig& config, const std::string& checkpoint,
                                                    dist::ProcessGroup* group = nullptr, bool per_class = true,
                                                    bool metrics = true);

// Loads `checkpoint` into the model config.model.type names and evaluates it on eval_input.
EvalReport evaluate_checkpoint(const PipelineConfig& config, const std::string& checkpoint,
                               dist::ProcessGroup* group = nullptr, bool per_class = true, bool metrics = true);

// Writes evaluations into an eval folder (model_dir/eval/): eval-<step>.json (and the detections,
// detections-<step>.json, for detection models; a named set's files are eval-<name>-<step>.json and
// detections-<name>-<step>.json, its metrics.jsonl split "eval/<name>" and its TensorBoard tags
// "eval/<name>/AP", ...), one metrics.jsonl
// record per evaluation (split "eval": the report's scalars: COCO's 12 stats or mIoU and accuracies,
// then the loss means) and the same scalars as TensorBoard events. Used by continuous evaluation and by eval.every_steps in training.
class EvalRecorder {
 public:
  explicit EvalRecorder(const std::string& eval_dir);
  ~EvalRecorder();
  EvalRecorder(const EvalRecorder&) = delete;
  EvalRecorder& operator=(const EvalRecorder&) = delete;
  void write(const EvalReport& report);

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
