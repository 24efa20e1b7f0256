// Implements: choosing the number of intra-op threads. LibTorch here starts with one thread, so
// every entry point calls set_threads() before doing work.
#pragma once

namespace detseg {

// n <= 0 means "all hardware threads". Returns the number actually set.
int set_threads(int n);
int hardware_threads();
// The intra-op thread count in effect (what set_threads last set).
int current_threads();
// How many distinct threads an at::parallel_for compiled in the library runs its chunks on now:
// current_threads() when the library was built with OpenMP as it must be (CMakeLists.txt), 1 when
// ATen's inline parallel loops silently fell back to serial (detseg builds before 2026-12-03 shipped that way).
int threads_reached_by_parallel_for();

}  // namespace detseg
