#include "detseg/core/malloc_reuse.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace detseg {

namespace {

std::string apply_malloc_settings() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if ((tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr) ||
      std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr || std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr)
    return "as set in the environment";
  // 32 MiB is the largest mmap threshold glibc accepts on 64-bit; blocks above it (a batch's
  // largest activations at big image sizes) still come from mmap.
  const bool mmap_set = ::mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
  const bool trim_set = ::mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;
  if (!mmap_set || !trim_set) return "glibc's defaults (mallopt refused)";
  return "freed memory kept for reuse (mmap threshold 32 MiB, trim threshold 1 GiB)";
}

}  // namespace

const std::string& keep_freed_memory_for_reuse() {
  static const std::string done = apply_malloc_settings();
  return done;
}

}  // namespace detseg
