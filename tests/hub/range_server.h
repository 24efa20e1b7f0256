// Test helper of tests/hub: runs tests/fixtures/range_server.py (a loopback HTTP server with
// Range support and modes that cut, stall or redirect) for the lifetime of the object, and reads
// back its request log.
#pragma once

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "command_runner.h"
#include "test_paths.h"

namespace detseg::test {

class RangeServer {
 public:
  // Serves the files of `root`; its log and port file go to `state_dir`.
  RangeServer(const std::filesystem::path& root, const std::filesystem::path& state_dir)
      : log_(state_dir / "requests.jsonl") {
    namespace fs = std::filesystem;
    fs::create_directories(state_dir);
    const fs::path port_file = state_dir / "port";
    fs::remove(port_file);
    fs::remove(log_);
    // The venv's python when there is one, else the system's: the server needs only the stdlib.
    const std::string python = fs::exists(DETSEG_PYTHON) ? DETSEG_PYTHON : "python3";
    pid_ = detseg::testing::start_background(
        python + " " + DETSEG_SOURCE_DIR + "/tests/fixtures/range_server.py --root " + root.string() + " --log " +
            log_.string() + " --port-file " + port_file.string() + " --lifetime 600",
        state_dir / "server.out");
    for (int i = 0; i < 200 && !fs::exists(port_file); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!fs::exists(port_file))
      throw std::runtime_error("range_server.py did not start: " + detseg::testing::read_text(state_dir / "server.out"));
    port_ = std::stoi(detseg::testing::read_text(port_file));
  }
  ~RangeServer() { stop(); }
  RangeServer(const RangeServer&) = delete;
  RangeServer& operator=(const RangeServer&) = delete;

  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    detseg::testing::wait_for(pid_, 10);
    pid_ = -1;
  }

  // http://127.0.0.1:PORT/<mode>/<name>; modes: range, norange, cut, stall, redirect.
  std::string url(const std::string& mode, const std::string& name) const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/" + mode + "/" + name;
  }

  // One {"path", "range" (the Range header or null), "status"} per request, in order.
  std::vector<nlohmann::json> requests() const {
    std::vector<nlohmann::json> out;
    std::istringstream lines(detseg::testing::read_text(log_));
    for (std::string line; std::getline(lines, line);)
      if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    return out;
  }

 private:
  std::filesystem::path log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace detseg::test
