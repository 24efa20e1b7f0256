// Implements: a small TensorBoard event-file writer (TFRecord framing with masked CRC32C around
// hand-encoded Event protos carrying scalar summaries; no protobuf dependency) and a reader of
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
