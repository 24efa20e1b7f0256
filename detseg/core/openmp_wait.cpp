#include "detseg/core/openmp_wait.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace detseg {

OpenMpWait openmp_wait_for_load(double load, int cpus, int threads) {
  char reason[128];
  std::snprintf(reason, sizeof reason,
                "chosen from the load at start: %.2f other runnable threads, %d CPUs, %d threads", load, cpus,
                threads);
  // Half a CPU of slack: a shell or an editor wakes now and then.
  if (load + threads <= cpus + 0.5) return {"GOMP_SPINCOUNT", "10000", reason};
  return {"OMP_WAIT_POLICY", "passive", reason};
}

namespace {
int procs_running() {
  std::ifstream stat("/proc/stat");
  std::string key;
  long long value = 0;
  while (stat >> key) {
    if (key == "procs_running" && stat >> value) return static_cast<int>(value);
    stat.ignore(1 << 20, '\n');
  }
  return -1;
}
}  // namespace

double runnable_threads_now() {
  constexpr int kSamples = 5;
  int sum = 0;
  for (int i = 0; i < kSamples; ++i) {
    if (i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const int running = procs_running();
    if (running < 1) {
      double load[1] = {0.0};
      return ::getloadavg(load, 1) == 1 ? load[0] : 0.0;
    }
    sum += running - 1;  // less this reader
  }
  return static_cast<double>(sum) / kSamples;
}

std::string openmp_wait_in_effect() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  const char* reason = std::getenv("DETSEG_OPENMP_WAIT_REASON");
  const std::string setting = policy ? std::string("OMP_WAIT_POLICY=") + policy
                              : spin ? std::string("GOMP_SPINCOUNT=") + spin
                                     : std::string("libgomp's default");
  return setting + " (" + (reason ? reason : (policy || spin) ? "set in the environment" : "nothing set") + ")";
}

}  // namespace detseg
