// Implements: `detseg check-data`: every image and annotation of a config's inputs read once, with
// every problem reported in one pass (missing files, images that do not decode or decode with a
// warning, sizes that disagree with the annotations, EXIF orientation included, boxes outside their
// image, label maps), and the same check of the evaluation sets that `detseg train` makes before
// its first step, so a bad evaluation image stops a run at once instead of at its first evaluation.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "detseg/config/config.h"

namespace detseg {

struct DataProblem {
  DataProblem(std::string line_, bool stops_, std::string warned_file_ = "")
      : line(std::move(line_)), stops(stops_), warned_file(std::move(warned_file_)) {}
  std::string line;    // one line in our words, naming the file
  bool stops = false;  // the configured policies stop on it (bad_images: stop, a size mismatch, ...)
  std::string warned_file;  // an image decoded with a warning: read_image warns of it once per run too
};

// What checking one input found.
struct InputCheck {
  std::string name;    // train_input, eval_input, eval_inputs.<name>
  std::string source;  // its annotations
  std::string bad_images, box_policy;  // the input's policies
  int64_t images = 0;  // images checked (every sample_1_of_n-th, at most max_images: what is read)
  int64_t missing = 0, undecodable = 0, with_warnings = 0, size_mismatches = 0, bad_labels = 0;
  int64_t boxes = 0, boxes_kept = 0, boxes_clipped = 0, boxes_dropped_outside = 0, boxes_degenerate = 0;
  bool annotations_failed = false;  // the annotations themselves could not be read (one problem)
  std::vector<DataProblem> problems;  // in image order

  int64_t stopping() const;
  std::string summary() const;  // one line: the counts
};

// Reads every image (and label map) of `input` once, on current_threads() threads.
InputCheck check_input_data(const PipelineConfig& config, const std::string& name, const InputConfig& input,
                            bool training);

// train_input, eval_input and each eval_inputs entry that has annotations.
std::vector<InputCheck> check_config_data(const PipelineConfig& config);

// What `detseg train` runs before its first step: the evaluation sets (evaluation_sets(config)).
// Logs each problem as a warning when `log` (rank 0); throws Error naming the first problem the
// policies stop on, before any training.
void check_evaluation_data(const PipelineConfig& config, bool log);

}  // namespace detseg
