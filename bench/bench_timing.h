// Implements: what the benchmark programs share: wall and process-CPU seconds per call after a
// warm-up call, peak RSS, and running a Python peer that prints one JSON line.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "detseg/engine/device.h"

namespace detseg::bench {

// Seconds per call, wall clock and process CPU time. On a shared machine the CPU time (all
// threads together) is the steadier figure; the peers measure both the same way.
struct Timing {
  double wall = 0, cpu = 0;
};

inline double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

inline Timing timed(const std::function<void()>& fn, int iters, bool warm_up = true) {
  if (warm_up) fn();
  const double cpu0 = process_cpu_s();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) fn();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {wall / iters, (process_cpu_s() - cpu0) / iters};
}

inline double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

// The first line of every benchmark's output: the CPU and the kernel sets its figures came from (a
// peer run by the benchmark inherits the same ATEN_CPU_CAPABILITY / ONEDNN_MAX_CPU_ISA).
inline void print_machine() { std::printf("machine: %s\n", detseg::machine_summary().c_str()); }

// Runs `command` and parses the JSON object starting at the first '{' of its output; an empty
// object (and a message) when it fails.
inline nlohmann::json run_peer(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  std::string text;
  char buf[4096];
  while (pipe && fgets(buf, sizeof buf, pipe)) text += buf;
  if (pipe && pclose(pipe) == 0 && text.find('{') != std::string::npos)
    return nlohmann::json::parse(text.substr(text.find('{')));
  std::printf("peer failed or absent (%s): no ratios\n", command.c_str());
  return nlohmann::json::object();
}

}  // namespace detseg::bench
