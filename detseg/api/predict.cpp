#include "detseg/api/predict.h"

#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <filesystem>
#include <unordered_map>

#include "detseg/api/inference.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/log.h"
#include "detseg/core/progress.h"
#include "detseg/core/stop_signal.h"
#include "detseg/data/image_io.h"
#include "detseg/data/readers/coco.h"
#include "detseg/data/readers/rle.h"
#include "detseg/models/build.h"
#include "detseg/viz/draw.h"
#include "detseg/viz/label_map.h"

namespace detseg {
namespace fs = std::filesystem;

namespace {

void stop_if_interrupted(int64_t done, size_t total, const std::string& json_path) {
  if (const int signal = stop_signal())
    throw Interrupted(signal, str("prediction stopped by ", signal_name(signal), " after ", done, " of ", total,
                                  " images; ", json_path, " lists those"));
}

std::vector<std::string> list_images(const std::string& input) {
  DETSEG_CHECK(fs::exists(input), input, ": no such image or folder");
  if (!fs::is_directory(input)) return {input};
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(input)) {
    std::string ext = entry.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
    if (entry.is_regular_file() && (ext == ".jpg" || ext == ".jpeg" || ext == ".png")) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  DETSEG_CHECK(!files.empty(), input, ": no .jpg, .jpeg or .png images in this folder");
  return files;
}

// Image ids as the data set numbers them: eval_input's COCO file, when the config has one, maps
// each file name to its id, so detections.json is a COCO results file for that data set. Images not
// in it (or without such a file) are numbered 0, 1, ... in the order predicted.
std::unordered_map<std::string, int64_t> dataset_image_ids(const PipelineConfig& config) {
  std::unordered_map<std::string, int64_t> ids;
  const InputConfig& input = config.eval_input;
  if (input.format != "coco" || input.annotations.empty() || !file_exists(input.annotations)) return ids;
  for (const CocoImage& image : read_coco(input.annotations).images)
    ids.emplace(fs::path(image.file_name).filename().string(), image.id);
  log_info("image ids from ", input.annotations, " (", ids.size(), " images)");
  return ids;
}

int64_t image_id_of(const std::unordered_map<std::string, int64_t>& ids, const std::string& path, int64_t index) {
  auto it = ids.find(fs::path(path).filename().string());
  return it == ids.end() ? index : it->second;
}

void write_png(const std::string& path, const cv::Mat& image) {
  std::vector<uchar> png;
  DETSEG_CHECK(cv::imencode(".png", image, png), path, ": PNG encoding failed");
  write_file_atomic(path, std::string(png.begin(), png.end()));
}

// Segmenters: <stem>.png colour label map, <stem>_overlay.png on the photo, <stem>_labels.png
// class ids (single channel), and segmentation.json with each image's class pixel fractions.
int64_t predict_segmentation(const PipelineConfig& config, const PredictOptions& options) {
  const Segmenter segmenter(options.checkpoint, config);
  const std::vector<std::string>& names = segmenter.class_names();
  const int64_t num_classes = segmenter.num_classes();
  std::vector<std::string> images = list_images(options.input);
  const std::unordered_map<std::string, int64_t> image_ids = dataset_image_ids(config);
  make_directories(options.output);
  nlohmann::json all = nlohmann::json::array();
  int64_t index = 0;
  Progress progress("predict", 0, static_cast<int64_t>(images.size()), "img/s");
  for (const std::string& path : images) {
    if (stop_signal()) break;  // keep what is done: the JSON below lists the images so far
    const at::Tensor labels = segmenter.segment(read_image(path));
    const at::Tensor counts = at::bincount(labels.reshape({-1}), {}, num_classes).to(at::kDouble);
    nlohmann::json fractions = nlohmann::json::object();
    for (int64_t k = 0; k < num_classes; ++k) {
      const double f = counts[k].item<double>() / static_cast<double>(labels.numel());
      if (f > 0) fractions[k < static_cast<int64_t>(names.size()) ? names[k] : std::to_string(k)] = f;
    }
    const std::string stem = (fs::path(options.output) / fs::path(path).stem()).string();
    all.push_back({{"file_name", fs::path(path).filename().string()}, {"image_id", image_id_of(image_ids, path, index)},
                   {"label_map", fs::path(stem + "_labels.png").filename().string()}, {"class_fractions", fractions}});
    const cv::Mat colour = colorize_label_map(labels);
    cv::Mat bgr = cv::imread(path, cv::IMREAD_COLOR);
    DETSEG_CHECK(!bgr.empty(), path, ": cannot decode for drawing");
    write_png(stem + ".png", colour);
    write_png(stem + "_overlay.png", overlay_label_map(bgr, colour, 0.5));
    const at::Tensor ids = labels.clamp(0, 255).to(at::kByte).contiguous();
    write_png(stem + "_labels.png", cv::Mat(static_cast<int>(ids.size(0)), static_cast<int>(ids.size(1)), CV_8UC1,
                                            ids.data_ptr<uint8_t>()).clone());
    log_debug(path, ": label map -> ", stem, ".png, ", stem, "_overlay.png");
    ++index;
    progress.report(index);
  }
  const std::string json_path = (fs::path(options.output) / "segmentation.json").string();
  write_file_atomic(json_path, all.dump(1) + "\n");
  stop_if_interrupted(index, images.size(), json_path);
  return index;
}

}  // namespace

int64_t predict_images(const PipelineConfig& config, const PredictOptions& options) {
  // (The image-size limit is set where Detector/Segmenter load the model.)
  if (is_segmentation_model(config)) return predict_segmentation(config, options);
  const Detector detector(options.checkpoint, config);
  std::vector<std::string> images = list_images(options.input);
  const std::unordered_map<std::string, int64_t> image_ids = dataset_image_ids(config);
  make_directories(options.output);

  nlohmann::json all = nlohmann::json::array();
  int64_t index = 0;
  Progress progress("predict", 0, static_cast<int64_t>(images.size()), "img/s");
  for (const std::string& path : images) {
    if (stop_signal()) break;  // keep what is done: the JSON below lists the images so far
    const std::vector<Detection> detections = detector.detect(read_image(path));
    std::vector<DrawnBox> drawn;
    std::vector<DrawnMask> drawn_masks;
    for (const Detection& d : detections) {
      all.push_back({{"file_name", fs::path(path).filename().string()},
                     {"image_id", image_id_of(image_ids, path, index)},
                     {"category_id", d.category_id},
                     {"category_name", d.class_name},
                     {"bbox", {d.x1, d.y1, d.x2 - d.x1, d.y2 - d.y1}},
                     {"score", d.score}});
      if (!d.mask.empty()) {
        // Instance mask in the original image: RLE in the JSON, tinted in the picture.
        CocoRle rle = rle_encode_row_major(d.mask.data, d.mask.rows, d.mask.cols);
        all.back()["segmentation"] = {{"size", {d.mask.rows, d.mask.cols}}, {"counts", rle_to_string(rle)}};
        if (d.score >= options.score_threshold) drawn_masks.push_back({d.mask, d.label});
      }
      if (d.score >= options.score_threshold) drawn.push_back({d.x1, d.y1, d.x2, d.y2, d.label, d.score, d.class_name});
    }
    cv::Mat bgr = cv::imread(path, cv::IMREAD_COLOR);
    DETSEG_CHECK(!bgr.empty(), path, ": cannot decode for drawing");
    draw_masks(bgr, drawn_masks);
    draw_boxes(bgr, drawn);
    std::string out_png = (fs::path(options.output) / fs::path(path).stem()).string() + ".png";
    write_png(out_png, bgr);
    log_debug(path, ": ", detections.size(), " detections, ", drawn.size(), " drawn (score >= ", options.score_threshold,
              ") -> ", out_png);
    ++index;
    progress.report(index);
  }
  const std::string json_path = (fs::path(options.output) / "detections.json").string();
  write_file_atomic(json_path, all.dump(1) + "\n");
  stop_if_interrupted(index, images.size(), json_path);
  return index;
}

}  // namespace detseg
