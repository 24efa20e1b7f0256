// Implements: an allocation failure's message from a library (LibTorch's CPU and CUDA allocators,
// the C++ runtime) told in our words, with the size asked for, for the one line a command ends with.
// Torch-free: the `detseg` front's main.cpp uses it too.
#pragma once

#include <string>

namespace detseg {

// "out of memory: a block of 78.6 GB was asked for, and the system refused it" for an allocation
// failure's message (the first line of `what`), or "" when `what` is not one. detseg's own allocator
// guard (engine/memory.h) already writes "out of memory: ..."; that is returned as it is.
std::string out_of_memory_text(const std::string& what);

}  // namespace detseg
