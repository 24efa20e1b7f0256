#include "detseg/api/inference.h"

#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <torch/nn/module.h>

#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/data/loader.h"
#include "detseg/data/transforms/augment.h"
#include "detseg/engine/device.h"
#include "detseg/engine/evaluate.h"
#include "detseg/engine/export.h"
#include "detseg/engine/inputs.h"
#include "detseg/models/build.h"
#include "detseg/train/checkpoint.h"

namespace detseg {

namespace {

PipelineConfig config_for(const std::string& model, const InferenceOptions& options) {
  PipelineConfig config;
  if (!options.config.empty()) {
    config = load_config(options.config, options.overrides);
  } else {
    DETSEG_CONFIG_CHECK(is_exported_model(model), model, ": a checkpoint needs its config (InferenceOptions::config, "
                        "--config); only a model from `detseg export --format torchscript` carries one");
    DETSEG_CONFIG_CHECK(options.overrides.empty(), model, ": overrides need a config file");
    config = read_exported_model_info(model).config;
  }
  if (!options.device.empty()) config = parse_config(config_to_yaml(config), model, {"device=" + options.device});
  return config;
}

// What runs every image: the model, the loader's resize/pad/normalise, and the labels.
struct Loaded {
  PipelineConfig config;
  LoaderOptions loader;
  std::vector<std::string> class_names;
  std::vector<int64_t> category_ids;
  int64_t step = 0;
  bool exported = false;  // a traced graph: one image per forward pass
};

Loaded prepare(const std::string& model, const PipelineConfig& config, const ModelImpl& net, int64_t step) {
  Loaded l;
  l.config = config;
  l.step = step;
  set_max_image_pixels(config.max_image_pixels);
  l.loader = make_loader_options(config, config.eval_input, /*training=*/false, 1, net.input_size());
  if (is_exported_model(model)) {
    ExportedModelInfo info = read_exported_model_info(model);
    fit_loader_to_exported_model(l.loader, info);
    l.exported = true;
    l.class_names = std::move(info.class_names);
    l.category_ids = std::move(info.category_ids);
  } else {
    const nlohmann::json meta = nlohmann::json::parse(read_checkpoint_metadata(model), nullptr, false);
    if (meta.is_object() && meta.contains("class_names")) meta["class_names"].get_to(l.class_names);
    if (meta.is_object() && meta.contains("category_ids")) meta["category_ids"].get_to(l.category_ids);
  }
  return l;
}

// One RGB image as the model sees it: resized as the loader says.
Example example_of(const at::Tensor& rgb, const LoaderOptions& loader) {
  DETSEG_CHECK(rgb.defined() && rgb.dim() == 3 && rgb.size(0) == 3 && rgb.scalar_type() == at::kByte && rgb.size(1) > 0 &&
                   rgb.size(2) > 0,
               "inference: the image must be [3, H, W] uint8 RGB, got ", rgb.defined() ? rgb.sizes() : at::IntArrayRef{});
  Example ex;
  ex.image = rgb.cpu().contiguous();
  ex.original_height = ex.image.size(1);
  ex.original_width = ex.image.size(2);
  ex.boxes = at::zeros({0, 4}, at::kFloat);
  ex.classes = at::zeros({0}, at::kLong);
  ex.iscrowd = at::zeros({0}, at::kBool);
  Rng rng(0);
  augment(ex, loader.augment, rng);
  return ex;
}

// RGB images as the model's evaluation batch: resized, then padded as the loader says.
Batch batch_of(const std::vector<at::Tensor>& rgb, const LoaderOptions& loader, const torch::nn::Module& model) {
  std::vector<Example> examples;
  examples.reserve(rgb.size());
  for (const at::Tensor& image : rgb) examples.push_back(example_of(image, loader));
  return to_device(collate(examples, loader.collate), module_device(model));
}

Batch batch_of(const at::Tensor& rgb, const LoaderOptions& loader, const torch::nn::Module& model) {
  return batch_of(std::vector<at::Tensor>{rgb}, loader, model);
}

// One image's Boxes as Detections, with the training data's category ids and class names.
std::vector<Detection> detections_of(const Boxes& found, const Loaded& l) {
  const Boxes d = found.to(at::kCPU);
  std::vector<Detection> out;
  // Read through accessors: an item() per field and detection costs a dispatch each.
  const at::Tensor boxes = d.boxes.to(at::kFloat).contiguous(), scores = d.scores.to(at::kFloat).contiguous();
  const at::Tensor classes = d.classes.to(at::kLong).contiguous();
  const auto box = boxes.accessor<float, 2>();
  const auto score = scores.accessor<float, 1>();
  const auto label = classes.accessor<int64_t, 1>();
  for (int64_t i = 0; i < d.size(); ++i) {
    Detection det;
    det.x1 = box[i][0], det.y1 = box[i][1], det.x2 = box[i][2], det.y2 = box[i][3];
    det.score = score[i];
    det.label = label[i];
    det.category_id = det.label < static_cast<int64_t>(l.category_ids.size()) ? l.category_ids[det.label] : det.label;
    det.class_name = det.label < static_cast<int64_t>(l.class_names.size()) ? l.class_names[det.label]
                                                                              : std::to_string(det.label);
    if (d.masks.defined()) {
      const at::Tensor m = d.masks[i].to(at::kByte).contiguous();
      det.mask = cv::Mat(static_cast<int>(m.size(0)), static_cast<int>(m.size(1)), CV_8U, m.data_ptr<uint8_t>()).clone();
    }
    out.push_back(std::move(det));
  }
  return out;
}

}  // namespace

at::Tensor rgb_tensor_from_mat(const cv::Mat& image) {
  DETSEG_CHECK(!image.empty(), "inference: empty image");
  DETSEG_CHECK(image.depth() == CV_8U && (image.channels() == 1 || image.channels() == 3 || image.channels() == 4),
               "inference: the image must be 8-bit with 1, 3 (BGR) or 4 (BGRA) channels, got depth ", image.depth(),
               " with ", image.channels(), " channels");
  cv::Mat rgb;
  const int code = image.channels() == 1 ? cv::COLOR_GRAY2RGB : image.channels() == 3 ? cv::COLOR_BGR2RGB : cv::COLOR_BGRA2RGB;
  cv::cvtColor(image, rgb, code);
  const at::Tensor hwc = at::from_blob(rgb.data, {rgb.rows, rgb.cols, 3}, {static_cast<int64_t>(rgb.step[0]), 3, 1},
                                       at::kByte);
  return hwc.permute({2, 0, 1}).contiguous();
}

// ---- Detector

struct Detector::State {
  std::shared_ptr<DetectorImpl> model;
  Loaded loaded;
};

Detector::Detector(const std::string& model, const InferenceOptions& options)
    : Detector(model, config_for(model, options)) {}

Detector::Detector(const std::string& model, const PipelineConfig& config) : state_(std::make_shared<State>()) {
  DETSEG_CONFIG_CHECK(!is_segmentation_model(config), model, ": model.type ", config.model.type,
                      " is a segmentation model: use detseg::Segmenter");
  int64_t step = 0;
  state_->model = load_detector(config, model, &step);
  state_->loaded = prepare(model, config, *state_->model, step);
}

std::vector<Detection> Detector::detect(const cv::Mat& image) const { return detect(rgb_tensor_from_mat(image)); }

std::vector<Detection> Detector::detect(const at::Tensor& rgb) const {
  torch::NoGradGuard no_grad;
  const Loaded& l = state_->loaded;
  return detections_of(state_->model->detect(batch_of(rgb, l.loader, *state_->model))[0], l);
}

std::vector<std::vector<Detection>> Detector::detect_batch(const std::vector<at::Tensor>& rgb) const {
  torch::NoGradGuard no_grad;
  const Loaded& l = state_->loaded;
  std::vector<std::vector<Detection>> out;
  out.reserve(rgb.size());
  if (l.exported || rgb.size() <= 1) {
    for (const at::Tensor& image : rgb) out.push_back(detect(image));
    return out;
  }
  const std::vector<Boxes> found = state_->model->detect(batch_of(rgb, l.loader, *state_->model));
  for (const Boxes& boxes : found) out.push_back(detections_of(boxes, l));
  return out;
}

std::vector<std::vector<Detection>> Detector::detect_batch(const std::vector<cv::Mat>& images) const {
  std::vector<at::Tensor> rgb;
  rgb.reserve(images.size());
  for (const cv::Mat& image : images) rgb.push_back(rgb_tensor_from_mat(image));
  return detect_batch(rgb);
}

const std::vector<std::string>& Detector::class_names() const { return state_->loaded.class_names; }
int64_t Detector::step() const { return state_->loaded.step; }

// ---- Segmenter

struct Segmenter::State {
  std::shared_ptr<SegmenterImpl> model;
  Loaded loaded;
};

Segmenter::Segmenter(const std::string& model, const InferenceOptions& options)
    : Segmenter(model, config_for(model, options)) {}

Segmenter::Segmenter(const std::string& model, const PipelineConfig& config) : state_(std::make_shared<State>()) {
  DETSEG_CONFIG_CHECK(is_segmentation_model(config), model, ": model.type ", config.model.type,
                      " is a detector: use detseg::Detector");
  int64_t step = 0;
  state_->model = load_segmenter(config, model, &step);
  state_->loaded = prepare(model, config, *state_->model, step);
}

at::Tensor Segmenter::segment(const at::Tensor& rgb) const {
  torch::NoGradGuard no_grad;
  return state_->model->segment(batch_of(rgb, state_->loaded.loader, *state_->model))[0].cpu();
}

cv::Mat Segmenter::segment(const cv::Mat& image) const {
  const at::Tensor labels = segment(rgb_tensor_from_mat(image)).to(at::kInt).contiguous();
  return cv::Mat(static_cast<int>(labels.size(0)), static_cast<int>(labels.size(1)), CV_32S, labels.data_ptr<int32_t>())
      .clone();
}

const std::vector<std::string>& Segmenter::class_names() const { return state_->loaded.class_names; }
int64_t Segmenter::num_classes() const { return state_->model->num_classes(); }
int64_t Segmenter::step() const { return state_->loaded.step; }

}  // namespace detseg
