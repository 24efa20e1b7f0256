#include "detseg/api/predict.h"

#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <unordered_map>

#include "detseg/api/inference.h"
#include "detseg/api/predict_parts.h"
#include "detseg/api/predict_pipeline.h"
#include "detseg/api/tiled_detect.h"
#include "detseg/api/video_io.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/json.h"
#include "detseg/core/log.h"
#include "detseg/core/progress.h"
#include "detseg/core/stop_signal.h"
#include "detseg/core/threads.h"
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

// The images to predict, sorted: `input` itself, or the .jpg/.jpeg/.png files directly in it.
std::vector<std::string> list_images(const std::string& input) {
  std::error_code error;
  const fs::file_status status = fs::status(input, error);
  DETSEG_CHECK(status.type() != fs::file_type::not_found, input, ": no such image or folder");
  DETSEG_CHECK(!error, input, ": cannot be read: ", error.value() == ELOOP ? "a symlink loop" : error.message());
  if (status.type() != fs::file_type::directory) return {input};
  std::vector<std::string> files;
  fs::directory_iterator it(input, error);
  DETSEG_CHECK(!error, input, ": cannot list this folder: ", error.message());
  for (; it != fs::directory_iterator(); it.increment(error)) {
    DETSEG_CHECK(!error, input, ": cannot list this folder: ", error.message());
    const fs::path& path = it->path();
    std::string ext = path.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
    if (ext != ".jpg" && ext != ".jpeg" && ext != ".png") continue;
    const bool regular = it->is_regular_file(error);
    // A symlink that leads nowhere or back to itself: the image the user meant is not there.
    DETSEG_CHECK(!error, path.string(), ": ",
                 error.value() == ELOOP ? "a symlink loop (the link leads back to itself)" : error.message());
    if (regular) files.push_back(path.string());
  }
  std::sort(files.begin(), files.end());
  DETSEG_CHECK(!files.empty(), input, ": no .jpg, .jpeg or .png images in this folder");
  return files;
}

// A file name as JSON text can hold it: valid UTF-8 as it is, and each byte that is not part of
// valid UTF-8 as the four characters \xHH (docs/cli.md), so no image loses its entry.
std::string json_file_name(const std::string& name) {
  if (is_valid_utf8(name)) return name;
  std::string out;
  for (size_t i = 0; i < name.size();) {
    size_t len = 1;
    const auto c = static_cast<unsigned char>(name[i]);
    if (c >= 0xC0) len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    if (c >= 0x80 && i + len <= name.size() && is_valid_utf8(std::string_view(name).substr(i, len))) {
      out.append(name, i, len);
      i += len;
    } else if (c >= 0x80) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02X", c);
      out += escaped;
      ++i;
    } else {
      out += name[i++];
    }
  }
  return out;
}

// Image ids: eval_input's COCO file, when the config has one, gives each of its images' file name
// its id, so detections.json is a COCO results file for that data set. Every other image gets an
// id above the file's largest (1, 2, ... without a file): ids never collide. images.json lists
// them all (a COCO `images` list), the table `detseg coco-eval --images` checks.
class ImageIds {
 public:
  explicit ImageIds(const PipelineConfig& config) {
    const InputConfig& input = config.eval_input;
    if (input.format != "coco" || input.annotations.empty() || !file_exists(input.annotations)) return;
    annotations_ = input.annotations;
    std::unordered_map<std::string, int> seen;
    for (const CocoImage& image : read_coco(input.annotations).images) {
      const std::string name = fs::path(image.file_name).filename().string();
      if (++seen[name] == 1) ids_.emplace(name, image.id);
      next_ = std::max(next_, image.id + 1);
    }
    // Two images of one file name (in different subfolders): a predicted file of that name could be
    // either, so it gets a fresh id instead of a guess.
    for (const auto& [name, count] : seen)
      if (count > 1) {
        ids_.erase(name);
        log_warn(input.annotations, ": ", count, " images are named ", name, "; a predicted ", name,
                 " gets an id of its own");
      }
    log_info("image ids from ", input.annotations, " (", ids_.size(), " images)");
  }
  const std::string& annotations() const { return annotations_; }
  int64_t id_of(const std::string& path) {
    const auto it = ids_.find(fs::path(path).filename().string());
    return it == ids_.end() ? next_++ : it->second;
  }

 private:
  std::string annotations_;
  std::unordered_map<std::string, int64_t> ids_;
  int64_t next_ = 1;
};

// The picture drawn for input `path`: the input's whole file name plus `suffix`, so a.jpg and a.png
// of one folder draw to a.jpg.png and a.png.png.
std::string output_path(const PredictOptions& options, const std::string& path, const std::string& suffix) {
  return (fs::path(options.output) / fs::path(path).filename()).string() + suffix;
}

// Refuses outputs that would replace an input, before the model is loaded.
void check_outputs(const PipelineConfig& config, const PredictOptions& options, const std::vector<std::string>& images,
                   const std::vector<std::string>& json_files, const std::vector<std::string>& suffixes) {
  const bool folder = is_directory(options.input);
  if (folder) {
    DETSEG_CONFIG_CHECK(!same_file(options.output, options.input), "--output ", options.output,
                        ": is the image folder given by --input; the pictures would be written among the images "
                        "(and read as images by the next run); choose another folder");
  }
  std::vector<CommandInput> inputs;
  for (const std::string& image : images)
    inputs.push_back({image, folder ? "an image of the folder given by --input" : "the image given by --input"});
  std::vector<std::string> outputs;
  for (const std::string& name : json_files) outputs.push_back((fs::path(options.output) / name).string());
  for (const std::string& image : images)
    for (const std::string& suffix : suffixes) outputs.push_back(output_path(options, image, suffix));
  check_predict_outputs(config, options, inputs, outputs);
}

// File names are escaped already; a class name that is not UTF-8 (from a label-map text file)
// becomes U+FFFD rather than costing every image its detections.
std::string dump_json(const nlohmann::json& value) {
  return value.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// images.json: the id, file name and size of every image predicted (a COCO `images` list).
void write_image_table(const PredictOptions& options, const nlohmann::json& images, const std::string& annotations) {
  nlohmann::json table = {{"images", images}};
  if (!annotations.empty()) table["ids_from"] = annotations;
  write_file_atomic((fs::path(options.output) / "images.json").string(), dump_json(table));
}

// Pictures are renamed into place whole but not flushed to disk one by one (two fsyncs an image
// held the writing thread longer than the PNG encoding); the JSON files, written last, are synced.
void write_png(const std::string& path, const cv::Mat& image) {
  std::vector<uchar> png;
  DETSEG_CHECK(cv::imencode(".png", image, png), path, ": PNG encoding failed");
  write_file_atomic(path, std::string(png.begin(), png.end()), Durability::kAtomicOnly);
}

// Segmenters: <file name>.png colour label map, <file name>_overlay.png on the photo,
// <file name>_labels.png class ids (single channel), and segmentation.json with each image's class
// pixel fractions.
int64_t predict_segmentation(const PipelineConfig& config, const PredictOptions& options) {
  std::vector<std::string> images = list_images(options.input);
  check_outputs(config, options, images, {"segmentation.json", "images.json"},
                options.draw ? std::vector<std::string>{".png", "_overlay.png", "_labels.png"}
                             : std::vector<std::string>{"_labels.png"});
  const Segmenter segmenter(options.checkpoint, config);
  const std::vector<std::string>& names = segmenter.class_names();
  const int64_t num_classes = segmenter.num_classes();
  ImageIds image_ids(config);
  make_directories(options.output);
  nlohmann::json all = nlohmann::json::array(), table = nlohmann::json::array();
  int64_t index = 0;
  Progress progress("predict", 0, static_cast<int64_t>(images.size()), "img/s");
  for (const std::string& path : images) {
    if (stop_signal()) break;  // keep what is done: the JSON below lists the images so far
    const cv::Mat image = read_image_bgr(path);  // decoded once, upright: the model's input is what is drawn on
    const at::Tensor labels = segmenter.segment(rgb_tensor_from_bgr(image));
    const at::Tensor counts = at::bincount(labels.reshape({-1}), {}, num_classes).to(at::kDouble);
    nlohmann::json fractions = nlohmann::json::object();
    for (int64_t k = 0; k < num_classes; ++k) {
      const double f = counts[k].item<double>() / static_cast<double>(labels.numel());
      if (f > 0) fractions[k < static_cast<int64_t>(names.size()) ? names[k] : std::to_string(k)] = f;
    }
    const std::string stem = output_path(options, path, "");
    const std::string file_name = json_file_name(fs::path(path).filename().string());
    const int64_t image_id = image_ids.id_of(path);
    all.push_back({{"file_name", file_name}, {"image_id", image_id},
                   {"label_map", json_file_name(fs::path(stem + "_labels.png").filename().string())},
                   {"class_fractions", fractions}});
    table.push_back({{"id", image_id}, {"file_name", file_name}, {"width", labels.size(1)}, {"height", labels.size(0)}});
    if (options.draw) {
      const cv::Mat colour = colorize_label_map(labels);
      write_png(stem + ".png", colour);
      write_png(stem + "_overlay.png", overlay_label_map(image, colour, 0.5));
    }
    const at::Tensor ids = labels.clamp(0, 255).to(at::kByte).contiguous();
    write_png(stem + "_labels.png", cv::Mat(static_cast<int>(ids.size(0)), static_cast<int>(ids.size(1)), CV_8UC1,
                                            ids.data_ptr<uint8_t>()).clone());
    log_debug(path, ": label map -> ", stem, options.draw ? ".png, _overlay.png, _labels.png" : "_labels.png");
    ++index;
    progress.report(index);
  }
  const std::string json_path = (fs::path(options.output) / "segmentation.json").string();
  write_file_atomic(json_path, dump_json(all));
  write_image_table(options, table, image_ids.annotations());
  stop_if_interrupted(index, images.size(), json_path);
  return index;
}

}  // namespace

// ---- shared with the video path (predict_parts.h)

void check_predict_outputs(const PipelineConfig& config, const PredictOptions& options,
                           const std::vector<CommandInput>& inputs, const std::vector<std::string>& outputs) {
  std::vector<CommandInput> all = {{options.checkpoint, "the checkpoint given by --checkpoint"}};
  for (const std::string& file : config.files)
    all.push_back({file, file == config.source ? "the config given by --config" : "a _base_ file of the config"});
  if (!config.eval_input.annotations.empty())
    all.push_back({config.eval_input.annotations, "eval_input's annotation file (the image ids)"});
  all.insert(all.end(), inputs.begin(), inputs.end());
  check_output_is_not_an_input(options.output, "--output", all);
  DETSEG_CONFIG_CHECK(!file_exists(options.output) || is_directory(options.output), "--output ", options.output,
                      ": is a file; give a folder");
  check_outputs_are_not_inputs(outputs, "--output", all);
}

void check_detector_options(const PipelineConfig& config, const PredictOptions& options) {
  DETSEG_CONFIG_CHECK(options.batch >= 1 && options.batch <= 1024, "predict: --batch is a whole number in [1, 1024], got ",
                      options.batch);
  DETSEG_CONFIG_CHECK(options.every_nth_frame >= 1, "predict: --every-nth-frame is a whole number >= 1, got ",
                      options.every_nth_frame);
  if (config.postprocess.tile_size > 0) {
    DETSEG_CONFIG_CHECK(config.postprocess.tile_size >= 32, "predict: --tile ", config.postprocess.tile_size,
                        ": a tile is at least 32 pixels (postprocess.tile_size; 0 turns tiling off)");
    DETSEG_CONFIG_CHECK(!uses_instance_masks(config.model), "predict: --tile: model.type ", config.model.type,
                        " predicts instance masks, which are not tiled; predict it without --tile");
  }
}

std::vector<std::vector<Detection>> detect_images(const Detector& detector, const std::vector<cv::Mat>& images,
                                                  const TilingOptions& tiling, int64_t batch) {
  if (tiling.tile_size <= 0) return detector.detect_batch(images);
  std::vector<std::vector<Detection>> out;
  for (const cv::Mat& image : images)
    out.push_back(detect_tiled(image, tiling, batch, [&](const std::vector<cv::Mat>& tiles) {
      return detector.detect_batch(tiles);
    }));
  return out;
}

nlohmann::json detection_json(const Detection& d) {
  nlohmann::json entry = {{"category_id", d.category_id},
                          {"category_name", d.class_name},
                          {"bbox", {d.x1, d.y1, d.x2 - d.x1, d.y2 - d.y1}},
                          {"score", d.score}};
  if (!d.mask.empty()) {
    // Instance mask in the original image: RLE in the JSON, tinted in the picture.
    CocoRle rle = rle_encode_row_major(d.mask.data, d.mask.rows, d.mask.cols);
    entry["segmentation"] = {{"size", {d.mask.rows, d.mask.cols}}, {"counts", rle_to_string(rle)}};
  }
  return entry;
}

void draw_detections(cv::Mat& bgr, const std::vector<Detection>& detections, const PredictOptions& options) {
  std::vector<DrawnBox> drawn;
  std::vector<DrawnMask> drawn_masks;
  for (const Detection& d : detections) {
    if (d.score < options.score_threshold) continue;
    if (!d.mask.empty()) drawn_masks.push_back({d.mask, d.label, d.score});
    DrawnBox box;
    box.x1 = d.x1, box.y1 = d.y1, box.x2 = d.x2, box.y2 = d.y2;
    box.label = d.label;
    box.score = d.score;
    box.name = d.class_name;
    drawn.push_back(std::move(box));
  }
  draw_masks(bgr, drawn_masks);
  draw_boxes(bgr, drawn);
}

bool is_video_input(const std::string& input) {
  if (video_source_kind(input) != VideoSourceKind::kFile) return true;
  if (is_directory(input)) return false;
  std::string ext = fs::path(input).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  for (const char* image : {".jpg", ".jpeg", ".png", ".bmp", ".pbm", ".pgm", ".ppm", ".pnm"})
    if (ext == image) return false;
  // Another name: by its first bytes (a missing or unreadable file goes the image way, whose error
  // names it, unless its name says video).
  std::ifstream file(input, std::ios::binary);
  if (!file) {
    for (const char* video : {".mp4", ".avi", ".mkv", ".mov", ".webm", ".m4v", ".mpg", ".mpeg", ".ts", ".wmv", ".flv"})
      if (ext == video) return true;
    return false;
  }
  std::string head(64, '\0');
  file.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(file.gcount()));
  return image_format(head) == ImageFormat::kOther;
}

namespace {

// ---- images: decoding threads -> the model, a batch at a time -> a writing thread

// One image predicted, on its way to the writing thread.
struct PredictedImage {
  cv::Mat bgr;  // decoded once, upright: the model's input is what is drawn on
  std::vector<Detection> detections;
};

int64_t predict_detections(const PipelineConfig& config, const PredictOptions& options) {
  check_detector_options(config, options);
  std::vector<std::string> images = list_images(options.input);
  check_outputs(config, options, images, {"detections.json", "images.json"},
                options.draw ? std::vector<std::string>{".png"} : std::vector<std::string>{});
  const Detector detector(options.checkpoint, config);
  const TilingOptions tiling = tiling_options(config);
  ImageIds image_ids(config);
  make_directories(options.output);

  const int64_t total = static_cast<int64_t>(images.size());
  // With tiles an image is a batch of its own; a few images in flight, not the folder.
  const int64_t per_pass = tiling.tile_size > 0 ? 1 : options.batch;
  OrderedQueue<cv::Mat> decoded(per_pass + 2);
  OrderedQueue<PredictedImage> predicted(per_pass + 2);
  StageThreads stages([&] {
    decoded.close();
    predicted.close();
  });
  const CloseOnExit close_on_exit([&] {
    decoded.close();
    predicted.close();
  });

  std::atomic<int64_t> next_to_decode{0};
  const int decoders = std::clamp(hardware_threads() / 4, 1, 4);
  for (int t = 0; t < decoders; ++t)
    stages.start([&] {
      for (int64_t i = next_to_decode++; i < total; i = next_to_decode++)
        if (!decoded.push(i, read_image_bgr(images[static_cast<size_t>(i)]))) return;
    });

  nlohmann::json all = nlohmann::json::array(), table = nlohmann::json::array();
  std::atomic<int64_t> written{0};
  stages.start([&] {
    Progress progress("predict", 0, total, "img/s");
    for (int64_t i = 0;; ++i) {
      std::optional<PredictedImage> p = predicted.pop();
      if (!p) return;
      const std::string& path = images[static_cast<size_t>(i)];
      const std::string file_name = json_file_name(fs::path(path).filename().string());
      const int64_t image_id = image_ids.id_of(path);
      for (const Detection& d : p->detections) {
        nlohmann::json entry = detection_json(d);
        entry["file_name"] = file_name;
        entry["image_id"] = image_id;
        all.push_back(std::move(entry));
      }
      table.push_back({{"id", image_id}, {"file_name", file_name}, {"width", p->bgr.cols}, {"height", p->bgr.rows}});
      if (options.draw) {
        draw_detections(p->bgr, p->detections, options);
        const std::string out_png = output_path(options, path, ".png");
        write_png(out_png, p->bgr);
        log_debug(path, ": ", p->detections.size(), " detections -> ", out_png);
      }
      written = i + 1;
      progress.report(i + 1);
    }
  });

  // The model, on this thread.
  for (int64_t index = 0; index < total && !stop_signal() && !stages.failed();) {
    std::vector<cv::Mat> batch;
    while (static_cast<int64_t>(batch.size()) < per_pass && index + static_cast<int64_t>(batch.size()) < total) {
      std::optional<cv::Mat> image = decoded.pop();
      if (!image) break;  // a stage failed: its error is rethrown below
      batch.push_back(std::move(*image));
    }
    if (batch.empty()) break;
    std::vector<std::vector<Detection>> found = detect_images(detector, batch, tiling, options.batch);
    for (size_t k = 0; k < batch.size(); ++k)
      if (!predicted.push(index + static_cast<int64_t>(k), {std::move(batch[k]), std::move(found[k])})) break;
    index += static_cast<int64_t>(batch.size());
  }
  // Keep what is done (a stop between batches): the writer drains the images predicted, the JSON
  // below lists them.
  decoded.close();
  predicted.close();
  stages.join();
  stages.rethrow();
  const std::string json_path = (fs::path(options.output) / "detections.json").string();
  write_file_atomic(json_path, dump_json(all));
  write_image_table(options, table, image_ids.annotations());
  stop_if_interrupted(written, images.size(), json_path);
  return written;
}

}  // namespace

int64_t predict_images(const PipelineConfig& config, const PredictOptions& options) {
  // (The image-size limit is set where Detector/Segmenter load the model.)
  DETSEG_CONFIG_CHECK(options.score_threshold >= 0 && options.score_threshold <= 1,
                      "predict: the score threshold is a number in [0, 1], got ", options.score_threshold);
  if (is_segmentation_model(config)) {
    DETSEG_CONFIG_CHECK(config.postprocess.tile_size == 0 && options.batch == 1,
                        "predict: --tile and --batch are for detectors; model.type ", config.model.type,
                        " is a segmenter, which predicts one whole image at a time");
    DETSEG_CONFIG_CHECK(!is_video_input(options.input), "predict: ", options.input,
                        ": videos are for detectors; model.type ", config.model.type, " is a segmenter");
    return predict_segmentation(config, options);
  }
  if (is_video_input(options.input)) return predict_video(config, options);
  return predict_detections(config, options);
}

}  // namespace detseg
