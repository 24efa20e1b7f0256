// Implements: the JSON-lines metrics log declared in metrics_jsonl.h.
#include "detseg/io/metrics_jsonl.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "detseg/core/error.h"
#include "detseg/core/files.h"

namespace detseg {

double unix_time_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

MetricsJsonlWriter::MetricsJsonlWriter(const std::string& path) : path_(path) {
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) make_directories(parent.string());
  file_ = std::fopen(path.c_str(), "a");
  DETSEG_CHECK(file_, path, ": cannot open metrics log for appending: ", std::strerror(errno));
}

MetricsJsonlWriter::~MetricsJsonlWriter() {
  if (file_) std::fclose(file_);
}

void MetricsJsonlWriter::write(const MetricsRecord& r) {
  nlohmann::ordered_json j;
  j["step"] = r.step;
  j["time"] = r.time > 0 ? r.time : unix_time_now();
  j["split"] = r.split;
  for (const auto& [name, v] : r.values) {
    DETSEG_CHECK(name != "step" && name != "time" && name != "split", path_, ": metric name '",
                 name, "' is reserved");
    if (std::isfinite(v))
      j[name] = v;
    else
      j[name] = nullptr;
  }
  const std::string line = j.dump() + "\n";
  DETSEG_CHECK(std::fputs(line.c_str(), file_) >= 0, path_, ": write failed");
  std::fflush(file_);
}

std::vector<MetricsRecord> read_metrics_jsonl(const std::string& path) {
  std::ifstream in(path);
  DETSEG_CHECK(in, path, ": cannot open metrics log");
  std::vector<MetricsRecord> out;
  std::string line;
  for (long n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    nlohmann::ordered_json j;
    try {
      j = nlohmann::ordered_json::parse(line);
      MetricsRecord r;
      r.step = j.at("step").get<int64_t>();
      r.time = j.value("time", 0.0);
      r.split = j.value("split", std::string());
      for (const auto& [key, value] : j.items()) {
        if (key == "step" || key == "time" || key == "split") continue;
        r.values.emplace_back(key, value.is_number() ? value.get<double>() : std::nan(""));
      }
      out.push_back(std::move(r));
    } catch (const nlohmann::json::exception& e) {
      throw Error(str(location(path, n), "malformed metrics line: ", e.what()));
    }
  }
  return out;
}

}  // namespace detseg
