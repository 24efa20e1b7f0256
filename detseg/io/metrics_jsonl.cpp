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
    const std::string at = location(path, n);
    nlohmann::ordered_json j;
    try {
      j = nlohmann::ordered_json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      // e.byte: 1-based position of the character that broke the JSON, one past the end when it ran out.
      DETSEG_CHECK(e.byte <= line.size(), at, "the line ends before its JSON record does (cut short?)");
      throw Error(str(at, "not a JSON record: unexpected '", line.substr(e.byte - 1, 1), "' at column ", e.byte));
    }
    DETSEG_CHECK(j.is_object(), at, "expected a JSON object {\"step\": ..., ...}, got a JSON ", j.type_name());
    DETSEG_CHECK(j.contains("step") && j["step"].is_number_integer(), at,
                 j.contains("step") ? "\"step\" is not a whole number" : "no \"step\" (each line is one record: {\"step\": N, ...})");
    DETSEG_CHECK(!j.contains("time") || j["time"].is_number(), at, "\"time\" is not a number");
    DETSEG_CHECK(!j.contains("split") || j["split"].is_string(), at, "\"split\" is not a string");
    MetricsRecord r;
    r.step = j["step"].get<int64_t>();
    r.time = j.value("time", 0.0);
    r.split = j.value("split", std::string());
    for (const auto& [key, value] : j.items()) {
      if (key == "step" || key == "time" || key == "split") continue;
      r.values.emplace_back(key, value.is_number() ? value.get<double>() : std::nan(""));
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace detseg
