#include "detseg/engine/evaluate.h"

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <set>

#include "detseg/config/registry.h"
#include "detseg/core/error.h"
#include "detseg/core/progress.h"
#include "detseg/core/stop_signal.h"
#include "detseg/core/files.h"
#include "detseg/core/log.h"
#include "detseg/eval/coco_evaluator.h"
#include "detseg/eval/eval_analysis.h"
#include "detseg/data/readers/rle.h"
#include "detseg/eval/seg_metrics.h"
#include "detseg/eval/voc_ap.h"
#include "detseg/dist/process_group.h"
#include "detseg/engine/device.h"
#include "detseg/engine/export.h"
#include "detseg/engine/inputs.h"
#include "detseg/io/metrics_jsonl.h"
#include "detseg/io/tfevents.h"
#include "detseg/models/build.h"
#include "detseg/ops/fast_paths.h"
#include "detseg/structures/boxes.h"
#include "detseg/train/checkpoint.h"
#include "detseg/viz/eval_pictures.h"

namespace detseg {

namespace {

// With EMA on, the averaged weights are the ones to evaluate and export (the reference's rule).
template <typename Model>
std::shared_ptr<Model> loaded_for_eval(std::shared_ptr<Model> model, const PipelineConfig& config,
                                       const std::string& checkpoint, int64_t* step) {
  const at::Device device = resolve_device(config.device);
  model->to(device);
  to_fast_weight_layout(model->parameters());
  int64_t loaded_step = 0;
  if (is_exported_model(checkpoint)) {  // `detseg export --format torchscript`: its graph runs the network
    use_exported_network(*model, checkpoint, device);
    const ExportedModelInfo info = read_exported_model_info(checkpoint);
    loaded_step = info.step;
    model->class_names = info.class_names;
  } else {
    loaded_step = load_weights_for_eval(checkpoint, *model, /*use_ema=*/true);
    model->class_names = checkpoint_class_names(checkpoint);
  }
  if (step) *step = loaded_step;
  model->eval();
  return model;
}

// The evaluation losses of models that sample (the two-stage RPN minibatch) draw random numbers.
// Each batch draws them from a generator seeded by its first image's id, so an image's losses do
// not depend on which rank evaluates it (sharded evaluation equals one process's at eval batch
// size 1) nor on what ran before; the caller's CPU generator state comes back afterwards, so
// a periodic evaluation leaves the training's random stream as it was.
class EvalRandomness {
 public:
  EvalRandomness() : generator_(at::detail::getDefaultCPUGenerator()) {
    std::lock_guard<std::mutex> lock(generator_.mutex());
    saved_ = generator_.get_state();
  }
  ~EvalRandomness() {
    std::lock_guard<std::mutex> lock(generator_.mutex());
    generator_.set_state(saved_);
  }
  void seed_for(int64_t image_id) { at::manual_seed(static_cast<uint64_t>(image_id) * 2654435761u + 17); }

 private:
  at::Generator generator_;
  at::Tensor saved_;
};

}  // namespace

std::shared_ptr<DetectorImpl> load_detector(const PipelineConfig& config, const std::string& checkpoint,
                                            int64_t* step) {
  return loaded_for_eval(build_detector(config), config, checkpoint, step);
}

std::shared_ptr<SegmenterImpl> load_segmenter(const PipelineConfig& config, const std::string& checkpoint,
                                              int64_t* step) {
  return loaded_for_eval(build_segmenter(config), config, checkpoint, step);
}

namespace {

// The images this process evaluates (its shard), for the progress line.
int64_t images_in_shard(int64_t size, const LoaderOptions& o) {
  const int64_t n = (size + o.sample_1_of_n - 1) / o.sample_1_of_n;
  return (n + o.world_size - 1) / o.world_size;
}

}  // namespace

// The makers of config/parts.def's DETSEG_EVALUATOR lines (eval.metric).

std::unique_ptr<Evaluator> make_coco_evaluator(const PipelineConfig& config, const InputData& data, bool per_class) {
  CocoEvaluatorOptions o;
  o.params.use_categories = !config.eval.class_agnostic;
  o.segm = uses_instance_masks(config.model);
  o.per_class_text = per_class;
  o.analysis = config.eval.pictures;
  return std::make_unique<CocoEvaluator>(data.detection->coco(), o);
}

std::unique_ptr<Evaluator> make_voc_evaluator(const PipelineConfig& config, const InputData& data, bool) {
  VocEvalOptions o;
  o.use_07_metric = config.eval.voc_use_07_metric;
  return std::make_unique<VocEvaluator>(data.detection->coco(), o);
}

std::unique_ptr<Evaluator> make_miou_evaluator(const PipelineConfig&, const InputData& data, bool) {
  return std::make_unique<SemSegEvaluator>(data.num_classes, kIgnoreLabel, MeanIouConvention::kNonEmptyUnion,
                                           data.class_names);
}

namespace {

using EvaluatorMaker = std::unique_ptr<Evaluator> (*)(const PipelineConfig&, const InputData&, bool per_class);

EvaluatorMaker evaluator_maker(const std::string& name) {
  static const std::pair<const char*, EvaluatorMaker> kMakers[] = {
#define DETSEG_EVALUATOR(name, scores, maker, description) {name, maker},
#include "detseg/config/parts.def"
  };
  for (const auto& [entry, maker] : kMakers)
    if (name == entry) return maker;
  throw ConfigError("eval.metric: unknown metric " + name);
}

// eval.metric's evaluator (empty: coco for detection data, miou for label maps). Without metrics
// (--no-metrics), detections are only collected, for a results file.
std::unique_ptr<Evaluator> make_evaluator(const PipelineConfig& config, const InputData& data, bool per_class,
                                          bool metrics) {
  const bool segmentation = data.segmentation != nullptr;
  if (!metrics) {
    DETSEG_CONFIG_CHECK(!segmentation, "--no-metrics is for detection models (a segmentation model's output is "
                        "label maps: use detseg predict)");
    CocoEvaluatorOptions o;
    o.metrics = false;
    return std::make_unique<CocoEvaluator>(data.detection->coco(), o);
  }
  const std::string name = !config.eval.metric.empty() ? config.eval.metric : segmentation ? "miou" : "coco";
  const EvaluatorInfo* info = find_evaluator(name);
  DETSEG_CONFIG_CHECK(info != nullptr, "eval.metric: unknown metric ", name);
  DETSEG_CONFIG_CHECK(info->label_maps == segmentation, "eval.metric: ", name, " does not score ",
                      segmentation ? "label maps" : "detections");
  return evaluator_maker(name)(config, data, per_class);
}

// Image b's detections as COCO results: xywh in original pixels, the file's category ids, RLE masks.
// Detections of a model class the data set does not have (category id -1) are left out.
std::vector<CocoAnnotation> coco_detections(const Boxes& found, int64_t image_id, const InputData& data) {
  const Boxes d = found.to(at::kCPU);
  const at::Tensor xywh = xyxy_to_xywh(d.boxes.to(at::kDouble)).contiguous();
  const at::Tensor scores = d.scores.to(at::kDouble).contiguous();
  const at::Tensor classes = d.classes.to(at::kLong).contiguous();
  // Read through accessors: an item() per field would build a tensor view per number.
  const auto box = xywh.accessor<double, 2>();
  const auto score = scores.accessor<double, 1>();
  const auto label = classes.accessor<int64_t, 1>();
  std::vector<CocoAnnotation> out;
  for (int64_t i = 0; i < d.size(); ++i) {
    CocoAnnotation a;
    a.image_id = image_id;
    a.category_id = data.category_ids.at(static_cast<size_t>(label[i]));
    if (a.category_id < 0) continue;
    for (int k = 0; k < 4; ++k) a.bbox[k] = box[i][k];
    a.score = score[i];
    if (d.masks.defined()) {
      const at::Tensor mask = d.masks[i].to(at::kByte).contiguous();
      a.segmentation.kind = CocoSegmentation::kRle;
      a.segmentation.rle = rle_encode_row_major(mask.data_ptr<uint8_t>(), mask.size(0), mask.size(1));
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace

EvalReport evaluate_model(const PipelineConfig& config, ModelImpl& model, int64_t step, dist::ProcessGroup* group,
                          bool per_class, bool metrics) {
  torch::NoGradGuard no_grad;
  model.eval();
  const InputData data = make_input_data(config, config.eval_input, /*training=*/false, model.class_names);
  if (model.class_names.empty() && data.detection)
    log_warn(config.eval_input.annotations, ": the checkpoint does not name its classes; they are taken to be the "
             "data set's ", quoted_names(data.class_names), " in this order");
  std::vector<std::string> absent;
  for (size_t k = 0; k < data.category_ids.size(); ++k)
    if (data.category_ids[k] < 0) absent.push_back(data.class_names[k]);
  if (!absent.empty())
    log_warn(config.eval_input.annotations, ": has no category for the model's classes ", quoted_names(absent),
             "; their detections are not scored");
  std::unique_ptr<Evaluator> evaluator = make_evaluator(config, data, per_class, metrics);
  LoaderOptions options =
      make_loader_options(config, config.eval_input, /*training=*/false, config.eval.batch_size, model.input_size());
  const bool sharded = group != nullptr && group->world_size() > 1;
  if (sharded) {
    options.rank = group->rank();
    options.world_size = group->world_size();
  }
  const at::Device device = module_device(model);
  options.pin_memory = device.is_cuda();
  Loader loader(data.size, data.load, options);
  // A sharded loader pads each shard by wrapping around: position k of rank r is a repeat when
  // k * world + r reaches the number of images, and is left out.
  const int64_t total_images = (data.size + options.sample_1_of_n - 1) / options.sample_1_of_n;
  const int64_t ignore = config.model.deeplab.ignore_label;

  EvalReport report;
  report.step = step;
  report.main_process = !sharded || group->rank() == 0;
  // Loss means over images: each batch's loss counts once per image in it that is not a repeat,
  // so each image counts once however the images are sharded.
  std::vector<std::pair<std::string, double>> loss_sums;
  int64_t position = 0;
  Batch batch;
  EvalRandomness randomness;
  Progress progress("eval", 0, images_in_shard(data.size, options), "img/s");
  while (loader.next(batch)) {
    throw_if_stop_requested("evaluation");
    if (report.main_process) progress.report(position + batch.size());
    if (!batch.image_ids.empty()) randomness.seed_for(batch.image_ids.front());
    auto [losses, predictions] = model.losses_and_predict(to_device(batch, device));
    int64_t fresh = 0;
    // (batch.positions: each image's place in the shard, also when images were left out before it)
    for (int64_t b = 0; b < batch.size(); ++b) fresh += batch.positions[b] * options.world_size + options.rank < total_images;
    std::vector<std::pair<std::string, double>> values = {{"total_loss", losses.total.item<double>()}};
    for (auto& [name, value] : losses.parts) values.push_back({name, value.item<double>()});
    if (loss_sums.empty())
      for (const auto& v : values) loss_sums.push_back({v.first, 0.0});
    for (size_t i = 0; i < values.size() && i < loss_sums.size(); ++i)
      loss_sums[i].second += values[i].second * static_cast<double>(fresh);

    for (int64_t b = 0; b < batch.size(); ++b, ++position) {
      if (batch.positions[b] * options.world_size + options.rank >= total_images) continue;
      const ImagePrediction& p = predictions[static_cast<size_t>(b)];
      EvalSample sample;
      sample.image_id = batch.image_ids[static_cast<size_t>(b)];
      at::Tensor gt, pred;  // alive while process() reads them
      if (p.label_map.defined()) {
        const int64_t h = batch.original_sizes[b][0].item<int64_t>(), w = batch.original_sizes[b][1].item<int64_t>();
        DETSEG_CHECK(batch.image_sizes[b][0].item<int64_t>() == h && batch.image_sizes[b][1].item<int64_t>() == w,
                     "segmentation evaluation: image ", sample.image_id, " was resized; evaluation runs at full resolution");
        gt = batch.label_maps[b].slice(0, 0, h).slice(1, 0, w);
        if (ignore != kIgnoreLabel) gt = gt.masked_fill(gt == ignore, kIgnoreLabel);
        gt = gt.to(at::kInt).contiguous();
        pred = p.label_map.cpu().to(at::kInt).contiguous();
        sample.ground_truth_labels = gt.data_ptr<int32_t>();
        sample.predicted_labels = pred.data_ptr<int32_t>();
        sample.height = h;
        sample.width = w;
      } else {
        sample.detections = coco_detections(p.detections, sample.image_id, data);
        report.num_detections += static_cast<int64_t>(sample.detections.size());
      }
      evaluator->process(sample);
      ++report.num_images;
    }
  }
  if (sharded) {
    nlohmann::json mine = {{"state", evaluator->shard_state()}, {"images", report.num_images},
                           {"detections", report.num_detections}, {"losses", nlohmann::json::array()}};
    for (const auto& [name, sum] : loss_sums) mine["losses"].push_back(sum);
    const std::vector<std::string> all = group->all_gather_bytes(mine.dump());
    if (!report.main_process) return report;  // rank 0 holds the merged evaluation
    for (size_t r = 0; r < all.size(); ++r) {
      if (static_cast<int64_t>(r) == group->rank()) continue;
      const nlohmann::json shard = nlohmann::json::parse(all[r]);
      evaluator->merge_shard_state(shard["state"].get<std::string>());
      report.num_images += shard["images"].get<int64_t>();
      report.num_detections += shard["detections"].get<int64_t>();
      const auto sums = shard["losses"].get<std::vector<double>>();
      for (size_t i = 0; i < sums.size() && i < loss_sums.size(); ++i) loss_sums[i].second += sums[i];
    }
  }
  const Metrics m = evaluator->summarize();
  report.metrics = m;
  report.text = m.text;
  report.detections = m.results;
  if (metrics && config.eval.pictures) {
    if (std::shared_ptr<EvalAnalysis> analysis = evaluator->analysis()) {
      // PNG pictures for `detseg eval` (per_class) and the final step; TensorBoard's PR curves,
      // a few kB, at every evaluation (docs/evaluation.md, "Pictures").
      analysis->render = per_class || step >= config.train.num_steps;
      if (data.detection) analysis->image_dir = data.detection->options().image_dir;
      report.analysis = analysis;
    }
  }
  nlohmann::ordered_json json = {{"step", step}, {"num_images", report.num_images}};
  json.update(m.json);
  report.scalars = m.values;
  if (metrics) {
    json["losses"] = nlohmann::ordered_json::object();
    for (const auto& [name, sum] : loss_sums) {
      const double mean = report.num_images > 0 ? sum / static_cast<double>(report.num_images) : 0.0;
      report.text += str(" eval ", name, " = ", mean, "\n");
      json["losses"][name] = mean;
      report.scalars.push_back({name, mean});
    }
  }
  report.json = json.dump(2) + "\n";
  return report;
}

std::vector<EvalSet> evaluation_sets(const PipelineConfig& config) {
  std::vector<EvalSet> sets;
  if (!config.eval_input.annotations.empty()) sets.push_back({"", config.eval_input});
  for (const auto& [name, input] : config.eval_inputs) {
    DETSEG_CONFIG_CHECK(!input.annotations.empty(), location(config.source), "eval_inputs.", name,
                        ".annotations: required");
    sets.push_back({name, input});
  }
  if (config.eval.on_train > 0) {
    DETSEG_CONFIG_CHECK(!config.train_input.annotations.empty(), location(config.source),
                        "eval.on_train needs train_input.annotations");
    EvalSet train{"train", config.train_input};
    train.input.max_images = config.eval.on_train;
    train.input.sample_1_of_n = 1;
    sets.push_back(train);
  }
  return sets;
}

void check_evaluation_sets(const PipelineConfig& config, const std::vector<std::string>& model_classes) {
  for (const EvalSet& set : evaluation_sets(config)) {
    PipelineConfig one = config;
    one.eval_input = set.input;
    make_input_data(one, set.input, /*training=*/false, model_classes);
  }
}

std::vector<EvalReport> evaluate_model_on_sets(const PipelineConfig& config, ModelImpl& model, int64_t step,
                                               dist::ProcessGroup* group, bool per_class, bool metrics) {
  std::vector<EvalReport> reports;
  for (const EvalSet& set : evaluation_sets(config)) {
    // Each set is evaluated as if it were the config's eval_input: one code path for all of them.
    PipelineConfig one = config;
    one.eval_input = set.input;
    reports.push_back(evaluate_model(one, model, step, group, per_class, metrics));
    reports.back().set_name = set.name;
  }
  return reports;
}

std::string eval_reports_text(const std::vector<EvalReport>& reports) {
  std::string out;
  for (const EvalReport& r : reports)
    out += (r.set_name.empty() ? std::string() : str("set ", r.set_name, " (", r.num_images, " images):\n")) + r.text;
  return out;
}

namespace {
// The model config.model.type names, with `checkpoint`'s (EMA) weights; `step` receives its step.
std::shared_ptr<ModelImpl> load_model_for_eval(const PipelineConfig& config, const std::string& checkpoint,
                                               int64_t& step) {
  // An exported graph takes one image of its traced size; evaluation batches eval.batch_size
  // images padded as the config says.
  DETSEG_CONFIG_CHECK(!is_exported_model(checkpoint), checkpoint, ": eval takes a training checkpoint; an exported "
                      "model runs with `detseg predict` (its detections.json scores with `detseg coco-eval`)");
  return loaded_for_eval(build_model(config), config, checkpoint, &step);
}
}  // namespace

std::vector<EvalReport> evaluate_checkpoint_on_sets(const PipelineConfig& config, const std::string& checkpoint,
                                                    dist::ProcessGroup* group, bool per_class, bool metrics) {
  int64_t step = 0;
  const auto model = load_model_for_eval(config, checkpoint, step);
  return evaluate_model_on_sets(config, *model, step, group, per_class, metrics);
}

EvalReport evaluate_checkpoint(const PipelineConfig& config, const std::string& checkpoint, dist::ProcessGroup* group,
                               bool per_class, bool metrics) {
  int64_t step = 0;
  const auto model = load_model_for_eval(config, checkpoint, step);
  return evaluate_model(config, *model, step, group, per_class, metrics);
}

EvalRecorder::EvalRecorder(const std::string& eval_dir)
    : dir_(eval_dir), metrics_(std::make_unique<MetricsJsonlWriter>(eval_dir + "/metrics.jsonl")),
      events_(std::make_unique<EventWriter>(eval_dir)) {}

EvalRecorder::~EvalRecorder() = default;

void EvalRecorder::write(const EvalReport& report) {
  const std::string set = report.set_name.empty() ? "" : report.set_name + "-";
  write_file_atomic(str(dir_, "/eval-", set, report.step, ".json"), report.json);
  if (!report.detections.empty())
    write_file_atomic(str(dir_, "/detections-", set, report.step, ".json"), report.detections);
  MetricsRecord record;
  record.step = report.step;
  record.time = unix_time_now();
  record.split = report.set_name.empty() ? "eval" : "eval/" + report.set_name;
  record.values = report.scalars;
  metrics_->write(record);
  // One events file for every set: a named set's tags carry its name, so TensorBoard shows
  // eval/val/AP next to eval/train/AP.
  const std::string tag_prefix = report.set_name.empty() ? "" : "eval/" + report.set_name + "/";
  for (auto& [name, value] : record.values) events_->add_scalar(tag_prefix + name, value, report.step);
  if (report.analysis) add_pr_curve_summaries(*events_, *report.analysis, tag_prefix, report.step);
  events_->flush();
  if (report.analysis && report.analysis->render) write_report_pictures(report, dir_);
}

std::string pictures_dir(const std::string& eval_dir, const EvalReport& report) {
  const std::string set = report.set_name.empty() ? "" : report.set_name + "-";
  return str(eval_dir, "/pictures-", set, report.step);
}

std::vector<std::string> write_report_pictures(const EvalReport& report, const std::string& eval_dir) {
  if (!report.analysis) return {};
  const auto start = std::chrono::steady_clock::now();
  const std::string dir = pictures_dir(eval_dir, report);
  try {
    std::vector<std::string> written = write_eval_pictures(*report.analysis, dir);
    log_info("evaluation pictures in ", dir, " (", written.size(), " files, ",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), " s)");
    return written;
  } catch (const Error& e) {
    // A picture that cannot be drawn or written costs the picture, not the evaluation (or the training).
    log_warn("evaluation pictures: ", e.what());
    return {};
  }
}

void evaluate_continuously(const PipelineConfig& config, const std::string& checkpoint_dir, double wait_seconds) {
  EvalRecorder recorder(checkpoint_dir + "/eval");
  CheckpointWatchOptions watch;
  watch.checkpoint_dir = checkpoint_dir;
  watch.wait_interval_s = wait_seconds;
  watch.poll_interval_s = 0.2;
  watch.first_checkpoint_timeout_s = wait_seconds;
  CheckpointWatcher watcher(watch);
  log_info("watching ", checkpoint_dir, " for new checkpoints (stop after ", wait_seconds, " s without one)");
  // The watcher hands out each new latest checkpoint once; older ones written meanwhile are
  // skipped, since the trainer's keep-N may delete them any moment.
  while (std::optional<std::string> path = watcher.next()) {
    std::vector<EvalReport> results;
    try {
      results = evaluate_checkpoint_on_sets(config, *path, nullptr, /*per_class=*/false);
    } catch (const Error& e) {
      // A checkpoint deleted by the trainer between listing and reading is not fatal.
      if (!file_exists(*path)) continue;
      throw;
    }
    if (results.empty()) continue;
    print_output(str("checkpoint step ", results[0].step, "\n", eval_reports_text(results)));
    for (const EvalReport& result : results) recorder.write(result);
    if (results[0].step >= config.train.num_steps) {
      log_info("evaluated the final step ", results[0].step, "; stopping");
      return;
    }
  }
  log_info("no new checkpoint for ", wait_seconds, " s; stopping");
}

}  // namespace detseg
