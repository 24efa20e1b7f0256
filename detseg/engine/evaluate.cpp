#include "detseg/engine/evaluate.h"

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

#include <cmath>
#include <cstdio>
#include <mutex>
#include <set>

#include "detseg/core/error.h"
#include "detseg/core/progress.h"
#include "detseg/core/stop_signal.h"
#include "detseg/core/files.h"
#include "detseg/core/log.h"
#include "detseg/eval/coco_results.h"
#include "detseg/eval/rle.h"
#include "detseg/dist/process_group.h"
#include "detseg/engine/device.h"
#include "detseg/engine/export.h"
#include "detseg/engine/inputs.h"
#include "detseg/io/metrics_jsonl.h"
#include "detseg/io/tfevents.h"
#include "detseg/models/build.h"
#include "detseg/structures/boxes.h"
#include "detseg/train/checkpoint.h"

namespace detseg {

namespace {

// With EMA on, the averaged weights are the ones to evaluate and export (the reference's rule).
template <typename Model>
std::shared_ptr<Model> loaded_for_eval(std::shared_ptr<Model> model, const PipelineConfig& config,
                                       const std::string& checkpoint, int64_t* step) {
  const at::Device device = resolve_device(config.device);
  model->to(device);
  int64_t loaded_step = 0;
  if (is_exported_model(checkpoint)) {  // `detseg export --format torchscript`: its graph runs the network
    use_exported_network(*model, checkpoint, device);
    loaded_step = read_exported_model_info(checkpoint).step;
  } else {
    loaded_step = load_weights_for_eval(checkpoint, *model, /*use_ema=*/true);
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

namespace {

// Gathers every rank's detections, image ids and loss sums on all ranks and merges them into
// rank 0's (the shards' wrap-around padding repeats a few images: each image counts once).
// Returns true on rank 0.
bool merge_eval_shards(dist::ProcessGroup& group, std::vector<CocoAnnotation>& detections,
                       std::set<int64_t>& images, std::vector<std::pair<std::string, double>>& loss_sums,
                       int64_t& batches) {
  nlohmann::json mine = {{"images", std::vector<int64_t>(images.begin(), images.end())},
                         {"batches", batches}, {"losses", nlohmann::json::array()}, {"dets", nlohmann::json::array()}};
  for (auto& [name, sum] : loss_sums) mine["losses"].push_back({name, sum});
  for (const auto& d : detections) {
    mine["dets"].push_back({d.image_id, d.category_id, d.bbox[0], d.bbox[1], d.bbox[2], d.bbox[3], d.score});
    const CocoRle& rle = d.segmentation.rle;
    if (d.segmentation.kind == CocoSegmentation::kRle) mine["dets"].back().push_back({rle.height, rle.width, rle_to_string(rle)});
  }
  std::vector<std::string> all = group.all_gather_bytes(mine.dump());
  if (group.rank() != 0) return false;
  detections.clear();
  images.clear();
  batches = 0;
  for (auto& entry : loss_sums) entry.second = 0;
  for (const std::string& bytes : all) {
    const nlohmann::json shard = nlohmann::json::parse(bytes);
    std::set<int64_t> fresh;
    for (int64_t id : shard["images"].get<std::vector<int64_t>>())
      if (images.insert(id).second) fresh.insert(id);
    for (const auto& d : shard["dets"]) {
      if (!fresh.count(d[0].get<int64_t>())) continue;
      CocoAnnotation a;
      a.id = static_cast<int64_t>(detections.size()) + 1;
      a.image_id = d[0].get<int64_t>();
      a.category_id = d[1].get<int64_t>();
      for (int k = 0; k < 4; ++k) a.bbox[k] = d[2 + k].get<double>();
      a.score = d[6].get<double>();
      if (d.size() > 7) {
        a.segmentation.kind = CocoSegmentation::kRle;
        a.segmentation.rle = rle_from_string(d[7][2].get<std::string>(), d[7][0].get<int64_t>(), d[7][1].get<int64_t>());
      }
      detections.push_back(a);
    }
    batches += shard["batches"].get<int64_t>();
    const auto& losses = shard["losses"];
    if (loss_sums.empty())
      for (const auto& l : losses) loss_sums.push_back({l[0].get<std::string>(), 0.0});
    for (size_t i = 0; i < losses.size() && i < loss_sums.size(); ++i) loss_sums[i].second += losses[i][1].get<double>();
  }
  return true;
}

}  // namespace

namespace {
// The images this process evaluates (its shard), for the progress line.
int64_t images_in_shard(int64_t size, const LoaderOptions& o) {
  const int64_t n = (size + o.sample_1_of_n - 1) / o.sample_1_of_n;
  return (n + o.world_size - 1) / o.world_size;
}
}  // namespace

DetectionEvalResult evaluate_detector(const PipelineConfig& config, DetectorImpl& model, dist::ProcessGroup* group,
                                      bool metrics) {
  torch::NoGradGuard no_grad;
  model.eval();
  auto dataset = make_detection_dataset(config.eval_input, /*training=*/false, uses_instance_masks(config.model));
  LoaderOptions options =
      make_loader_options(config, config.eval_input, /*training=*/false, config.eval.batch_size, model.input_size());
  const bool sharded = group != nullptr && group->world_size() > 1;
  if (sharded) {
    options.rank = group->rank();
    options.world_size = group->world_size();
  }
  const at::Device device = module_device(model);
  options.pin_memory = device.is_cuda();
  Loader loader(dataset->size(), [dataset](int64_t i) { return dataset->get(i); }, options);

  DetectionEvalResult result;
  std::vector<std::pair<std::string, double>> loss_sums;
  int64_t batches = 0;
  std::set<int64_t> evaluated_images;
  Batch batch;
  EvalRandomness randomness;
  const bool main_process = !sharded || group->rank() == 0;
  Progress progress("eval", 0, images_in_shard(dataset->size(), options), "img/s");
  int64_t done = 0;
  while (loader.next(batch)) {
    throw_if_stop_requested("evaluation");
    done += batch.size();
    if (main_process) progress.report(done);
    if (!batch.image_ids.empty()) randomness.seed_for(batch.image_ids.front());
    auto [losses, detections] = model.losses_and_detect(to_device(batch, device));
    for (Boxes& d : detections) d = d.to(at::kCPU);
    std::vector<std::pair<std::string, double>> values = {{"total_loss", losses.total.item<double>()}};
    for (auto& [name, value] : losses.parts) values.push_back({name, value.item<double>()});
    if (loss_sums.empty()) loss_sums = std::vector<std::pair<std::string, double>>(values.size(), {"", 0.0});
    for (size_t i = 0; i < values.size(); ++i) {
      loss_sums[i].first = values[i].first;
      loss_sums[i].second += values[i].second;
    }
    ++batches;
    for (int64_t b = 0; b < batch.size(); ++b) {
      const int64_t image_id = batch.image_ids[static_cast<size_t>(b)];
      evaluated_images.insert(image_id);
      const Boxes& d = detections[static_cast<size_t>(b)];
      at::Tensor xywh = xyxy_to_xywh(d.boxes.to(at::kDouble)).contiguous();
      at::Tensor scores = d.scores.to(at::kDouble).contiguous();
      at::Tensor classes = d.classes.contiguous();
      for (int64_t i = 0; i < d.size(); ++i) {
        CocoAnnotation a;
        a.id = static_cast<int64_t>(result.detections.size()) + 1;
        a.image_id = image_id;
        a.category_id = dataset->label_to_category_id(classes[i].item<int64_t>());
        for (int k = 0; k < 4; ++k) a.bbox[k] = xywh[i][k].item<double>();
        a.score = scores[i].item<double>();
        if (d.masks.defined()) {
          // Instance masks [N, H, W] in the original image: RLE for segm evaluation.
          at::Tensor mask = d.masks[i].to(at::kByte).contiguous();
          a.segmentation.kind = CocoSegmentation::kRle;
          a.segmentation.rle = rle_encode_row_major(mask.data_ptr<uint8_t>(), mask.size(0), mask.size(1));
        }
        result.detections.push_back(a);
      }
    }
  }
  if (sharded && !merge_eval_shards(*group, result.detections, evaluated_images, loss_sums, batches)) {
    for (auto& [name, sum] : loss_sums) result.losses.push_back({name, batches ? sum / batches : 0.0});
    return result;  // not rank 0: rank 0 holds the merged evaluation
  }
  for (auto& [name, sum] : loss_sums) result.losses.push_back({name, batches ? sum / batches : 0.0});
  result.num_images = static_cast<int64_t>(evaluated_images.size());
  if (!metrics) return result;

  // Ground truth restricted to the images evaluated (sample_1_of_n / max_images), as pycocotools'
  // params.imgIds; detections carry the file's category ids.
  const CocoDataset& gt = dataset->coco();
  CocoDataset dt = coco_results_from(result.detections, gt);
  CocoEvalParams params;
  params.image_ids.assign(evaluated_images.begin(), evaluated_images.end());
  params.use_categories = !config.eval.class_agnostic;
  result.coco = coco_evaluate(gt, dt, params);
  if (uses_instance_masks(config.model)) {
    CocoEvalParams segm_params = params;
    segm_params.iou_type = CocoIouType::kSegm;
    result.has_segm = true;
    result.segm = coco_evaluate(gt, coco_results_from(result.detections, gt, /*box_mode=*/false), segm_params);
  }
  for (int64_t id : result.coco.params.category_ids) {
    auto it = gt.category_index.find(id);
    result.category_names.push_back(it == gt.category_index.end() ? std::to_string(id)
                                                                   : gt.categories[static_cast<size_t>(it->second)].name);
  }
  return result;
}

std::string eval_result_json(const DetectionEvalResult& r) {
  std::string out = str("{\n  \"step\": ", r.step, ",\n  \"num_images\": ", r.num_images, ",\n  \"stats\": [");
  char buf[64];
  for (size_t i = 0; i < r.coco.stats.size(); ++i) {
    std::snprintf(buf, sizeof(buf), "%.17g", r.coco.stats[i]);
    out += (i ? ", " : "") + std::string(buf);
  }
  out += "]";
  if (r.has_segm) {
    out += ",\n  \"segm_stats\": [";
    for (size_t i = 0; i < r.segm.stats.size(); ++i) {
      std::snprintf(buf, sizeof(buf), "%.17g", r.segm.stats[i]);
      out += (i ? ", " : "") + std::string(buf);
    }
    out += "]";
  }
  out += ",\n  \"per_category_ap\": {";
  for (size_t k = 0; k < r.coco.per_category_ap.size() && k < r.category_names.size(); ++k) {
    std::snprintf(buf, sizeof(buf), "%.17g", r.coco.per_category_ap[k]);
    out += str(k ? ", " : "", "\"", r.category_names[k], "\": ", buf);
  }
  out += "},\n  \"per_category_ap50\": {";
  for (size_t k = 0; k < r.coco.per_category_ap50.size() && k < r.category_names.size(); ++k) {
    std::snprintf(buf, sizeof(buf), "%.17g", r.coco.per_category_ap50[k]);
    out += str(k ? ", " : "", "\"", r.category_names[k], "\": ", buf);
  }
  out += "},\n  \"losses\": {";
  for (size_t i = 0; i < r.losses.size(); ++i) {
    std::snprintf(buf, sizeof(buf), "%.9g", r.losses[i].second);
    out += str(i ? ", " : "", "\"", r.losses[i].first, "\": ", buf);
  }
  return out + "}\n}\n";
}

std::string eval_result_text(const DetectionEvalResult& r, bool per_class) {
  std::string out = coco_summary_text(r.coco);
  if (r.has_segm) out += " segm (instance masks):\n" + coco_summary_text(r.segm);
  for (auto& [name, value] : r.losses) out += str(" eval ", name, " = ", value, "\n");
  if (per_class) {
    const bool ap50 = r.coco.per_category_ap50.size() == r.coco.per_category_ap.size();
    out += ap50 ? "\n category                       AP    AP50\n" : "\n category                       AP\n";
    for (size_t k = 0; k < r.coco.per_category_ap.size() && k < r.category_names.size(); ++k) {
      char line[160];
      if (ap50)
        std::snprintf(line, sizeof(line), " %-28s %7.3f %7.3f\n", r.category_names[k].c_str(), r.coco.per_category_ap[k],
                      r.coco.per_category_ap50[k]);
      else
        std::snprintf(line, sizeof(line), " %-28s %7.3f\n", r.category_names[k].c_str(), r.coco.per_category_ap[k]);
      out += line;
    }
  }
  return out;
}

std::shared_ptr<SegmenterImpl> load_segmenter(const PipelineConfig& config, const std::string& checkpoint,
                                              int64_t* step) {
  return loaded_for_eval(build_segmenter(config), config, checkpoint, step);
}

SegmentationEvalResult evaluate_segmenter(const PipelineConfig& config, SegmenterImpl& model,
                                          dist::ProcessGroup* group) {
  torch::NoGradGuard no_grad;
  model.eval();
  const InputData data = make_input_data(config, config.eval_input, /*training=*/false);
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
  // k * world + r reaches the number of images, and is left out of the metrics.
  const int64_t total_images = (data.size + options.sample_1_of_n - 1) / options.sample_1_of_n;
  const int64_t ignore = config.model.deeplab.ignore_label;
  ConfusionMatrix matrix(model.num_classes(), kIgnoreLabel);
  SegmentationEvalResult result;
  result.class_names = data.class_names;
  // Loss means weigh each batch's loss by its images that are not wrap-around repeats, so each
  // image counts once however the images are sharded (with eval batches of 1: the mean over images).
  std::vector<double> loss_sums;
  std::vector<std::string> loss_names;
  int64_t position = 0;
  Batch batch;
  const bool main_process = !sharded || group->rank() == 0;
  Progress progress("eval", 0, images_in_shard(data.size, options), "img/s");
  int64_t done = 0;
  while (loader.next(batch)) {
    throw_if_stop_requested("evaluation");
    done += batch.size();
    if (main_process) progress.report(done);
    auto [losses, maps] = model.losses_and_segment(to_device(batch, device));
    for (at::Tensor& map : maps) map = map.cpu();
    std::vector<std::pair<std::string, double>> values = {{"total_loss", losses.total.item<double>()}};
    for (auto& [name, value] : losses.parts) values.push_back({name, value.item<double>()});
    if (loss_sums.empty()) {
      loss_sums.assign(values.size(), 0.0);
      for (auto& v : values) loss_names.push_back(v.first);
    }
    int64_t fresh = 0;
    for (int64_t b = 0; b < batch.size(); ++b)
      if ((position + b) * options.world_size + options.rank < total_images) ++fresh;
    for (size_t i = 0; i < values.size() && i < loss_sums.size(); ++i)
      loss_sums[i] += values[i].second * static_cast<double>(fresh);
    for (int64_t b = 0; b < batch.size(); ++b, ++position) {
      if (position * options.world_size + options.rank >= total_images) continue;
      const int64_t h = batch.original_sizes[b][0].item<int64_t>(), w = batch.original_sizes[b][1].item<int64_t>();
      DETSEG_CHECK(batch.image_sizes[b][0].item<int64_t>() == h && batch.image_sizes[b][1].item<int64_t>() == w,
                   "segmentation evaluation: image ", batch.image_ids[static_cast<size_t>(b)],
                   " was resized; evaluation runs at full resolution");
      at::Tensor gt = batch.label_maps[b].slice(0, 0, h).slice(1, 0, w);
      if (ignore != kIgnoreLabel) gt = gt.masked_fill(gt == ignore, kIgnoreLabel);
      gt = gt.to(at::kInt).contiguous();
      const at::Tensor pred = maps[static_cast<size_t>(b)].to(at::kInt).contiguous();
      matrix.add(gt.data_ptr<int32_t>(), pred.data_ptr<int32_t>(), h * w);
      ++result.num_images;
    }
  }
  if (sharded) {
    nlohmann::json mine = {{"counts", matrix.counts}, {"losses", loss_sums}, {"images", result.num_images}};
    std::vector<std::string> all = group->all_gather_bytes(mine.dump());
    if (group->rank() == 0) {
      matrix.reset();
      std::fill(loss_sums.begin(), loss_sums.end(), 0.0);
      result.num_images = 0;
      for (const std::string& bytes : all) {
        const nlohmann::json shard = nlohmann::json::parse(bytes);
        const auto counts = shard["counts"].get<std::vector<int64_t>>();
        for (size_t i = 0; i < counts.size() && i < matrix.counts.size(); ++i) matrix.counts[i] += counts[i];
        const auto losses = shard["losses"].get<std::vector<double>>();
        for (size_t i = 0; i < losses.size() && i < loss_sums.size(); ++i) loss_sums[i] += losses[i];
        result.num_images += shard["images"].get<int64_t>();
      }
    }
  }
  const double images = static_cast<double>(result.num_images);
  for (size_t i = 0; i < loss_sums.size(); ++i)
    result.losses.push_back({loss_names[i], images > 0 ? loss_sums[i] / images : 0.0});
  result.metrics = seg_metrics(matrix);
  return result;
}

namespace {

nlohmann::json number_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

}  // namespace

std::string seg_eval_result_json(const SegmentationEvalResult& r) {
  const SegMetrics& m = r.metrics;
  nlohmann::ordered_json j = {{"step", r.step},
                      {"num_images", r.num_images},
                      {"mIoU", number_or_null(m.mean_iou)},
                      {"pixel_accuracy", number_or_null(m.pixel_accuracy)},
                      {"mean_accuracy", number_or_null(m.mean_accuracy)},
                      {"fwIoU", number_or_null(m.frequency_weighted_iou)},
                      {"per_class_iou", nlohmann::ordered_json::object()},
                      {"losses", nlohmann::ordered_json::object()}};
  for (size_t c = 0; c < m.iou.size(); ++c)
    j["per_class_iou"][c < r.class_names.size() ? r.class_names[c] : std::to_string(c)] = number_or_null(m.iou[c]);
  for (auto& [name, value] : r.losses) j["losses"][name] = value;
  return j.dump(2) + "\n";
}

std::string seg_eval_result_text(const SegmentationEvalResult& r) {
  std::string out = seg_metrics_text(r.metrics, r.class_names);
  for (auto& [name, value] : r.losses) out += str(" eval ", name, " = ", value, "\n");
  return out;
}

EvalReport evaluate_model(const PipelineConfig& config, ModelImpl& model, int64_t step, dist::ProcessGroup* group,
                          bool per_class, bool metrics) {
  EvalReport report;
  report.step = step;
  report.main_process = group == nullptr || group->world_size() <= 1 || group->rank() == 0;
  if (auto* segmenter = dynamic_cast<SegmenterImpl*>(&model)) {
    DETSEG_CONFIG_CHECK(metrics, "--no-metrics is for detection models (a segmentation model's output is label maps: "
                                 "use detseg predict)");
    SegmentationEvalResult r = evaluate_segmenter(config, *segmenter, group);
    r.step = step;
    report.num_images = r.num_images;
    if (!report.main_process) return report;
    report.text = seg_eval_result_text(r);
    report.json = seg_eval_result_json(r);
    report.scalars = {{"mIoU", r.metrics.mean_iou},
                      {"pixel_accuracy", r.metrics.pixel_accuracy},
                      {"mean_accuracy", r.metrics.mean_accuracy},
                      {"fwIoU", r.metrics.frequency_weighted_iou}};
    for (auto& l : r.losses) report.scalars.push_back(l);
    return report;
  }
  auto* detector = dynamic_cast<DetectorImpl*>(&model);
  DETSEG_CHECK(detector != nullptr, "evaluate_model: model is neither a detector nor a segmenter");
  DetectionEvalResult r = evaluate_detector(config, *detector, group, metrics);
  r.step = step;
  report.num_images = r.num_images;
  if (!report.main_process) return report;
  report.detections = coco_results_json(r.detections);
  report.num_detections = static_cast<int64_t>(r.detections.size());
  if (!metrics) {
    report.text = str(" ", r.detections.size(), " detections on ", r.num_images, " images (no metrics computed)\n");
    report.json = str("{\n  \"step\": ", step, ",\n  \"num_images\": ", r.num_images, ",\n  \"num_detections\": ",
                      r.detections.size(), "\n}\n");
    return report;
  }
  report.text = eval_result_text(r, per_class);
  report.json = eval_result_json(r);
  static const char* names[12] = {"AP", "AP50", "AP75", "APs", "APm", "APl",
                                  "AR1", "AR10", "AR100", "ARs", "ARm", "ARl"};
  for (int i = 0; i < 12; ++i) report.scalars.push_back({names[i], r.coco.stats[i]});
  if (r.has_segm)
    for (int i = 0; i < 12; ++i) report.scalars.push_back({std::string("segm_") + names[i], r.segm.stats[i]});
  for (auto& l : r.losses) report.scalars.push_back(l);
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
  if (is_segmentation_model(config)) return load_segmenter(config, checkpoint, &step);
  return load_detector(config, checkpoint, &step);
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
  events_->flush();
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
