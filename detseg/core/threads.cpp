#include "detseg/core/threads.h"

#include <ATen/Parallel.h>

#include "detseg/core/cpu_allocator.h"

#include <thread>

namespace detseg {

int hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

int set_threads(int n) {
  use_huge_page_allocator();
  if (n <= 0) n = hardware_threads();
  at::set_num_threads(n);
  return n;
}

int current_threads() { return at::get_num_threads(); }

}  // namespace detseg
