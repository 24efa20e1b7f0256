// OpenMP's wait policy from the load at start: spin where the run's threads fit beside the load,
// sleep at once where they would share cores (detseg/core/openmp_wait.h has the measurements).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "detseg/core/openmp_wait.h"

using detseg::openmp_wait_for_load;
using detseg::runnable_threads_now;

namespace {
std::string setting(double load, int cpus, int threads) {
  const auto wait = openmp_wait_for_load(load, cpus, threads);
  return wait.variable + "=" + wait.value;
}
}  // namespace

TEST(OpenMpWait, SpinsOnFreeCoresAndSleepsOnSharedOnes) {
  // A quiet 2-core machine, a 2-thread run: spin.
  EXPECT_EQ(setting(0.0, 2, 2), "GOMP_SPINCOUNT=10000");
  EXPECT_EQ(setting(0.5, 2, 2), "GOMP_SPINCOUNT=10000");  // a shell's noise
  // Another 2-thread job already on the 2 cores: sleep at once.
  EXPECT_EQ(setting(2.0, 2, 2), "OMP_WAIT_POLICY=passive");
  EXPECT_EQ(setting(0.6, 2, 2), "OMP_WAIT_POLICY=passive");
  // The same load on a machine with room for both runs: spin.
  EXPECT_EQ(setting(2.0, 16, 2), "GOMP_SPINCOUNT=10000");
  // A run that asks for more threads than the machine has free, even on a quiet machine.
  EXPECT_EQ(setting(0.0, 2, 4), "OMP_WAIT_POLICY=passive");
  EXPECT_EQ(setting(14.0, 16, 2), "GOMP_SPINCOUNT=10000");
  EXPECT_EQ(setting(14.6, 16, 2), "OMP_WAIT_POLICY=passive");
}

// The load is read now, not from the 1-minute average: two threads that never sleep are two
// runnable threads in every sample, whatever else the machine runs (other jobs only add to it).
TEST(OpenMpWait, CountsThreadsThatAreRunnableNow) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (int i = 0; i < 2; ++i)
    busy.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  const double load = runnable_threads_now();
  stop = true;
  for (auto& t : busy) t.join();
  EXPECT_GE(load, 2.0);
  // Beside them a 2-thread run on 2 CPUs would share its cores: it sleeps at once.
  EXPECT_EQ(setting(load, 2, 2), "OMP_WAIT_POLICY=passive");
}
