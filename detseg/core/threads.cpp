#include "detseg/core/threads.h"

#include <ATen/Parallel.h>

#include <array>
#include <atomic>
#include <thread>

namespace detseg {

int hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

int set_threads(int n) {
  if (n <= 0) n = hardware_threads();
  at::set_num_threads(n);
  return n;
}

int current_threads() { return at::get_num_threads(); }

int threads_reached_by_parallel_for() {
  std::array<std::atomic<bool>, 256> seen{};
  at::parallel_for(0, 1024, 1, [&](int64_t, int64_t) {
    seen[static_cast<size_t>(at::get_thread_num()) % seen.size()] = true;
  });
  int count = 0;
  for (const auto& s : seen) count += s.load();
  return count;
}

}  // namespace detseg
