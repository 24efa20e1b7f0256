// Implements: check-data (see check_data.h): the images decoded through the one decode path
// (data/image_codec.h) on a few threads, each problem kept as one line, in image order.
#include "detseg/engine/check_data.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <thread>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/log.h"
#include "detseg/core/threads.h"
#include "detseg/data/dataset.h"
#include "detseg/data/image_codec.h"
#include "detseg/engine/evaluate.h"
#include "detseg/engine/inputs.h"

namespace detseg {
namespace fs = std::filesystem;

namespace {

// One image's findings, filled by a worker thread.
struct ImageFindings {
  std::vector<DataProblem> problems;
  bool missing = false, undecodable = false, warned = false, mismatch = false, bad_label = false;
};

// Reads and decodes `path`; on success `image` holds it. Image problems stop under bad_images stop.
bool check_image(const std::string& path, bool stop_on_bad, ImageFindings& f, DecodedImage& image) {
  if (!file_exists(path)) {
    f.missing = true;
    f.problems.push_back({str(path, ": missing image file"), stop_on_bad});
    return false;
  }
  try {
    image = decode_image_file(read_file(path), path);
  } catch (const Error& e) {  // unreadable (a folder, no permission)
    image.error = e.what();
  }
  if (!image.error.empty()) {
    f.undecodable = true;
    f.problems.push_back({image.error, stop_on_bad});
    return false;
  }
  if (!image.warning.empty()) {
    f.warned = true;
    f.problems.push_back({image.warning, false, path});
  }
  return true;
}

// Runs `work(i)` for i in [0, n) on up to current_threads() threads.
void run_parallel(int64_t n, const std::function<void(int64_t)>& work) {
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(current_threads(), n));
  std::atomic<int64_t> next{0};
  auto loop = [&] {
    for (int64_t i = next++; i < n; i = next++) work(i);
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(loop);
  loop();
  for (auto& t : pool) t.join();
}

void add_findings(InputCheck& check, std::vector<ImageFindings>& findings) {
  for (ImageFindings& f : findings) {
    check.missing += f.missing;
    check.undecodable += f.undecodable;
    check.with_warnings += f.warned;
    check.size_mismatches += f.mismatch;
    check.bad_labels += f.bad_label;
    for (DataProblem& p : f.problems) check.problems.push_back(std::move(p));
  }
}

void check_detection(const DetectionDataset& data, const InputConfig& input, InputCheck& check) {
  const bool stop_on_bad = parse_bad_image_policy(input.bad_images) == BadImagePolicy::kStop;
  const std::string& source = data.coco().source;
  std::vector<int64_t> positions;  // what the loader reads: every sample_1_of_n-th item
  for (int64_t i = 0; i < data.size(); i += std::max<int64_t>(1, input.sample_1_of_n))
    positions.push_back(data.image_position(i));
  std::vector<ImageFindings> findings(positions.size());
  run_parallel(static_cast<int64_t>(positions.size()), [&](int64_t k) {
    const CocoImage& im = data.coco().images[static_cast<size_t>(positions[static_cast<size_t>(k)])];
    const std::string path = (fs::path(data.options().image_dir) / im.file_name).string();
    ImageFindings& f = findings[static_cast<size_t>(k)];
    DecodedImage image;
    if (!check_image(path, stop_on_bad, f, image)) return;
    const std::string mismatch =
        image_size_mismatch(path, image.bgr.cols, image.bgr.rows, image.orientation, im.width, im.height, source);
    if (!mismatch.empty()) {
      f.mismatch = true;
      f.problems.push_back({mismatch, true});
    }
  });
  check.images = static_cast<int64_t>(positions.size());
  add_findings(check, findings);
  const BoxStats& s = data.box_stats();
  check.boxes = s.total;
  check.boxes_kept = s.kept;
  check.boxes_clipped = s.clipped;
  check.boxes_dropped_outside = s.dropped_outside;
  check.boxes_degenerate = s.dropped_degenerate;
  if (s.clipped + s.dropped_outside + s.dropped_degenerate > 0)
    check.problems.push_back({str(source, ": of ", s.total, " boxes, ", s.clipped, " clipped to their image and ",
                                  s.dropped_outside, " dropped outside it (box_policy: ", input.box_policy, "), ",
                                  s.dropped_degenerate, " dropped with zero or negative size"),
                              false});
}

void check_segmentation(const SegmentationDataset& data, const InputConfig& input, InputCheck& check) {
  const bool stop_on_bad = parse_bad_image_policy(input.bad_images) == BadImagePolicy::kStop;
  const SegFolderOptions& o = data.folder().options;
  const LabelValues values(o.num_classes, o.void_values);
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < data.size(); i += std::max<int64_t>(1, input.sample_1_of_n)) indices.push_back(i);
  std::vector<ImageFindings> findings(indices.size());
  run_parallel(static_cast<int64_t>(indices.size()), [&](int64_t k) {
    const SegSample& s = data.folder().samples[static_cast<size_t>(indices[static_cast<size_t>(k)])];
    ImageFindings& f = findings[static_cast<size_t>(k)];
    DecodedImage image;
    const bool image_ok = check_image(s.image_path, stop_on_bad, f, image);
    try {
      LabelImage label = decode_label_png(read_file(s.label_path), s.label_path);
      if (!label.warning.empty()) {
        f.warned = true;
        f.problems.push_back({label.warning, false, s.label_path});
      }
      if (image_ok && (label.width != image.bgr.cols || label.height != image.bgr.rows)) {
        f.mismatch = true;
        f.problems.push_back({str(s.label_path, ": label map is ", label.width, "x", label.height, " but its image ",
                                  s.image_path, " is ", image.bgr.cols, "x", image.bgr.rows,
                                  image.orientation == 1 ? "" : str(" (after its EXIF orientation ", image.orientation, ")")),
                              true});
      }
      values.apply(label, s.label_path);
    } catch (const Error& e) {
      f.bad_label = true;
      f.problems.push_back({e.what(), true});
    }
  });
  check.images = static_cast<int64_t>(indices.size());
  add_findings(check, findings);
}

std::string count(int64_t n, const char* one, const char* many) { return str(n, " ", n == 1 ? one : many); }

}  // namespace

int64_t InputCheck::stopping() const {
  int64_t n = 0;
  for (const DataProblem& p : problems) n += p.stops;
  return n;
}

std::string InputCheck::summary() const {
  if (annotations_failed) return str(name, ": its annotations cannot be read (above); no image was checked");
  std::string text = str(name, " (", source, "): ", count(images, "image", "images"), " checked: ", missing, " missing, ",
                         undecodable, " undecodable, ", with_warnings, " decoded with a warning, ", size_mismatches,
                         " size mismatches");
  if (bad_labels > 0) text += str(", ", bad_labels, " bad label maps");
  if (boxes > 0)
    text += str("; boxes: ", boxes_kept, " of ", boxes, " kept, ", boxes_clipped, " clipped, ", boxes_dropped_outside,
                " dropped outside, ", boxes_degenerate, " degenerate (box_policy: ", box_policy, ")");
  const int64_t stops = stopping();
  text += stops > 0 ? str("; ", count(stops, "problem stops", "problems stop"), " training/evaluation (bad_images: ",
                          bad_images, ")")
                    : problems.empty() ? std::string("; clean") : str("; nothing stops (bad_images: ", bad_images, ")");
  return text;
}

InputCheck check_input_data(const PipelineConfig& config, const std::string& name, const InputConfig& input,
                            bool training) {
  InputCheck check;
  check.name = name;
  check.source = input.annotations;
  check.bad_images = input.bad_images;
  check.box_policy = input.box_policy;
  InputData data;
  try {
    data = make_input_data(config, input, training);
  } catch (const Error& e) {  // ConfigError too: the annotations themselves
    check.annotations_failed = true;
    check.problems.push_back({str(name, ": ", e.what()), true});
    return check;
  }
  if (data.detection) check_detection(*data.detection, input, check);
  else if (data.segmentation) check_segmentation(*data.segmentation, input, check);
  return check;
}

std::vector<InputCheck> check_config_data(const PipelineConfig& config) {
  std::vector<InputCheck> checks;
  if (!config.train_input.annotations.empty())
    checks.push_back(check_input_data(config, "train_input", config.train_input, /*training=*/true));
  if (!config.eval_input.annotations.empty())
    checks.push_back(check_input_data(config, "eval_input", config.eval_input, /*training=*/false));
  for (const auto& [name, input] : config.eval_inputs)
    checks.push_back(check_input_data(config, "eval_inputs." + name, input, /*training=*/false));
  return checks;
}

void check_evaluation_data(const PipelineConfig& config, bool log) {
  const std::vector<EvalSet> sets = evaluation_sets(config);
  if (sets.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  const DataProblem* first = nullptr;
  int64_t stopping = 0, images = 0;
  std::vector<InputCheck> checks;
  for (const EvalSet& set : sets)
    checks.push_back(check_input_data(config, set.name.empty() ? "eval_input" : "evaluation set " + set.name, set.input,
                                      /*training=*/false));
  for (const InputCheck& check : checks) {
    images += check.images;
    stopping += check.stopping();
    for (const DataProblem& p : check.problems) {
      // (keyed as read_image keys it: the evaluation does not say it again)
      if (log && !p.warned_file.empty()) log_warn_once(p.warned_file, p.line);
      else if (log) log_warn(p.line);
      if (p.stops && first == nullptr) first = &p;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char took[32];
  std::snprintf(took, sizeof(took), "%.1f", seconds);
  if (log) log_info("evaluation data checked before training: ", images, " images in ", took, " s");
  if (first != nullptr)
    throw Error(str(first->line, " (an evaluation image, found before training: the first evaluation would stop on it",
                    stopping > 1 ? str("; ", stopping - 1, " more such problems") : std::string(),
                    "; `detseg check-data --config ", config.source, "` lists every problem)"));
}

}  // namespace detseg
