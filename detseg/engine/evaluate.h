// Implements: evaluating a model on the eval input, one loop for every kind: the model's losses and
// predictions per batch, each image handed to the Evaluator eval.metric names (COCO AP as
// pycocotools computes it, with mask AP for Mask R-CNN; PASCAL VOC AP; mIoU), and the mean of each
// loss part; one checkpoint at a time or continuously as a trainer writes them.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "detseg/config/config.h"
#include "detseg/eval/evaluator.h"
#include "detseg/models/detector.h"
#include "detseg/models/segmenter.h"

namespace detseg {
namespace dist {
class ProcessGroup;
}
class MetricsJsonlWriter;
class EventWriter;
struct EvalAnalysis;

// A freshly built model with `checkpoint`'s weights (its EMA weights when it holds them).
// `step` receives the checkpoint's step when not null.
std::shared_ptr<DetectorImpl> load_detector(const PipelineConfig& config, const std::string& checkpoint,
                                            int64_t* step = nullptr);

std::shared_ptr<SegmenterImpl> load_segmenter(const PipelineConfig& config, const std::string& checkpoint,
                                              int64_t* step = nullptr);

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
  Metrics metrics;  // the evaluator's (rank 0): its values, per-class numbers, text
  // With eval.pictures: the numbers behind the evaluation pictures (coco and miou metrics);
  // analysis->render says whether the PNGs are wanted (detseg eval, the final step).
  std::shared_ptr<const EvalAnalysis> analysis;
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

// Reads every evaluation set's annotations as the evaluation will (no image is decoded), so that
// an empty set, a missing file or a class the model does not have stops `train` before its first
// step instead of at the first evaluation.
void check_evaluation_sets(const PipelineConfig& config, const std::vector<std::string>& model_classes);

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
// then the loss means) and the same scalars as TensorBoard events, with each class's PR curve at
// IoU 0.5 (pr_iou50/<class>) when the report has an analysis, and its pictures (pictures-<step>/)
// when the analysis asks for them. Used by continuous evaluation and by eval.every_steps in training.
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

// The folder of a report's pictures: eval_dir/pictures-<step> (pictures-<set>-<step> for a named set).
std::string pictures_dir(const std::string& eval_dir, const EvalReport& report);

// Writes the report's pictures there (viz/eval_pictures.h) and returns their paths; nothing
// without an analysis. A picture that cannot be written is a warning, not an error.
std::vector<std::string> write_report_pictures(const EvalReport& report, const std::string& eval_dir);

// Evaluates each checkpoint appearing in `checkpoint_dir` once, newest first when several wait;
// metrics go to checkpoint_dir/eval/ (metrics.jsonl, TensorBoard events, eval-<step>.json). Stops
// after `wait_seconds` without a new checkpoint, or once the step reaches train.num_steps.
void evaluate_continuously(const PipelineConfig& config, const std::string& checkpoint_dir, double wait_seconds);

}  // namespace detseg
