// Implements: choosing the number of intra-op threads. LibTorch here starts with one thread, so
// every entry point calls set_threads() before doing work.
#pragma once

namespace detseg {

// n <= 0 means "all hardware threads". Returns the number actually set. The first call also
// installs the huge-page CPU allocator (cpu_allocator.h): every entry point comes through here.
int set_threads(int n);
int hardware_threads();
// The intra-op thread count in effect (what set_threads last set).
int current_threads();

}  // namespace detseg
