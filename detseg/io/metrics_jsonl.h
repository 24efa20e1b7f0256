// Implements: the metrics log as JSON lines: one object per logging point
// {"step": 100, "time": 1733150000.5, "split": "train", "loss": 0.91, "lr": 0.08, ...},
// appended and flushed line by line so a crash loses at most the current line.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace detseg {

struct MetricsRecord {
  int64_t step = 0;
  double time = 0;
  std::string split;                                   // "train", "eval", ...
  std::vector<std::pair<std::string, double>> values;  // ordered; NaN/Inf written as null
};

class MetricsJsonlWriter {
 public:
  explicit MetricsJsonlWriter(const std::string& path);  // appends; creates parent folders
  ~MetricsJsonlWriter();
  MetricsJsonlWriter(const MetricsJsonlWriter&) = delete;
  MetricsJsonlWriter& operator=(const MetricsJsonlWriter&) = delete;
  // record.time <= 0 uses the current time.
  void write(const MetricsRecord& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// Reads every line; a malformed line throws Error naming file:line. null values read as NaN.
std::vector<MetricsRecord> read_metrics_jsonl(const std::string& path);

double unix_time_now();

}  // namespace detseg
