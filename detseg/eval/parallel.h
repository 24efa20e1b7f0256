// Implements: a tiny torch-free parallel loop for the evaluators: [0, n) split into chunks that
// `threads` std::threads take from a shared counter, so uneven work (big images) balances.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace detseg {

// Calls fn(begin, end, worker) over chunks of at most `grain` indices; worker is in [0, threads).
// The first exception thrown by any chunk is rethrown here after every thread has stopped.
template <typename Fn>
void eval_parallel_for(int64_t n, int threads, int64_t grain, const Fn& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, (n + grain - 1) / grain)));
  if (threads == 1) {
    fn(int64_t(0), n, 0);
    return;
  }
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&](int worker) {
    try {
      for (int64_t begin; (begin = next.fetch_add(grain)) < n;) fn(begin, std::min(n, begin + grain), worker);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      next = n;
    }
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < threads; ++w) pool.emplace_back(work, w);
  work(0);
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace detseg
