// Implements: a small TensorBoard event-file writer (TFRecord framing with masked CRC32C around
// hand-encoded Event protos carrying scalar and PR-curve summaries; no protobuf dependency) and a reader of
// the same records for tests and for `detseg plot`.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace detseg {

// Protobuf encodings, exposed for tests.
std::string encode_scalar_event(double wall_time, int64_t step, const std::string& tag,
                                float value);
std::string encode_file_version_event(double wall_time);  // "brain.Event:2"
std::string frame_tfrecord(const std::string& payload);   // length, CRCs, payload

// One PR curve as TensorBoard's pr_curves plugin stores it: at num_thresholds score thresholds
// evenly spaced in [0, 1], the true/false positive, true/false negative counts, precision and
// recall (each vector num_thresholds long, at least 2).
struct PrCurveData {
  std::vector<float> true_positives, false_positives, true_negatives, false_negatives, precision, recall;
  size_t num_thresholds() const { return precision.size(); }
};
// A Summary.Value tagged `tag` with the plugin's metadata (plugin_name "pr_curves", content
// PrCurvePluginData{version 0, num_thresholds}) and a float tensor [6, num_thresholds] in the
// order above, as tensorboard.plugins.pr_curve.summary.raw_data_pb writes it.
std::string encode_pr_curve_event(double wall_time, int64_t step, const std::string& tag, const PrCurveData& data,
                                  const std::string& display_name = "", const std::string& description = "");

class EventWriter {
 public:
  // Creates `dir` and dir/events.out.tfevents.<unix seconds>.<host>.<pid>, starting with the
  // file-version record TensorBoard expects.
  explicit EventWriter(const std::string& dir);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // wall_time < 0 uses the current time.
  void add_scalar(const std::string& tag, double value, int64_t step, double wall_time = -1);
  // TensorBoard's tag convention for these is "<name>/pr_curves".
  void add_pr_curve(const std::string& tag, const PrCurveData& data, int64_t step, const std::string& display_name = "",
                    const std::string& description = "", double wall_time = -1);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& payload);
  std::string path_;
  std::FILE* file_ = nullptr;
};

struct ScalarEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string tag;
  float value = 0;
};

// All scalar summaries in an event file, in order. Verifies both CRCs of every record; a
// truncated last record (a writer still running) ends the list, a bad CRC throws Error.
std::vector<ScalarEvent> read_scalar_events(const std::string& path);

}  // namespace detseg
