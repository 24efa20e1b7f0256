// Implements: the torch-free `detseg` front. It is linked from main.cpp (the whole grammar),
// cmd_coco_eval.cpp, cmd_config.cpp, cmd_fetch.cpp and this file only, so it starts without
// loading LibTorch (~1 s here).
// Subcommands that need LibTorch are forwarded, arguments unchanged, to `detseg-engine`, which is
// built from the same main.cpp with every subcommand and installed next to this binary.
// A new subcommand that needs LibTorch gets a one-line forwarder below.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "detseg/core/error.h"
#include "detseg/core/openmp_wait.h"

namespace detseg {
namespace {
int g_threads = 1;
}

int hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

int set_threads(int n) {
  g_threads = n <= 0 ? hardware_threads() : n;
  return g_threads;
}

int current_threads() { return g_threads; }

namespace cli {
namespace {

std::string engine_path() {
  if (const char* env = std::getenv("DETSEG_ENGINE"); env && *env) return env;
  std::string self(4096, '\0');
  ssize_t n = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
  DETSEG_CHECK(n > 0, "cannot locate the detseg binary (/proc/self/exe): ", std::strerror(errno));
  self.resize(static_cast<size_t>(n));
  return self.substr(0, self.rfind('/') + 1) + "detseg-engine";
}

// Replaces this process with the engine, given this process's own command line.
[[noreturn]] void forward_to_engine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  DETSEG_CHECK(!raw.empty(), "cannot read this process's command line (/proc/self/cmdline)");
  std::vector<std::string> args;
  for (size_t start = 0; start < raw.size();) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    args.push_back(raw.substr(start, end - start));
    start = end + 1;
  }
  const std::string engine = engine_path();
  args[0] = engine;
  // OpenMP's waiting, from the load at start (detseg/core/openmp_wait.h): libgomp reads it once
  // at load time, so it must be in the engine's environment from the start. The user's own
  // OMP_WAIT_POLICY or GOMP_SPINCOUNT wins.
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) {
    const OpenMpWait wait = openmp_wait_for_load(runnable_threads_now(), hardware_threads(), current_threads());
    ::setenv(wait.variable.c_str(), wait.value.c_str(), 0);
    ::setenv("DETSEG_OPENMP_WAIT_REASON", wait.reason.c_str(), 1);  // for `detseg info`
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(engine.c_str(), argv.data());
  throw Error(str("cannot run ", engine, ": ", std::strerror(errno),
                  ". It is built next to `detseg` (ninja target detseg-engine); DETSEG_ENGINE overrides its path"));
}

}  // namespace

int run_train(const TrainArgs&) { forward_to_engine(); }
int run_eval(const EvalArgs&) { forward_to_engine(); }
int run_predict(const PredictArgs&) { forward_to_engine(); }
int run_convert_voc(const ConvertVocArgs&) { forward_to_engine(); }
int run_convert_yolo(const ConvertYoloArgs&) { forward_to_engine(); }
int run_info(const InfoArgs& args) {
  if (run_config_info(args)) return 0;
  forward_to_engine();
}
int run_plot(const PlotArgs&) { forward_to_engine(); }
int run_export(const ExportArgs&) { forward_to_engine(); }
int run_check_data(const CheckDataArgs&) { forward_to_engine(); }
int run_augment(const AugmentArgs&) { forward_to_engine(); }

}  // namespace cli
}  // namespace detseg
