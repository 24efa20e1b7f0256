#include "detseg/core/cpu_allocator.h"

#include <cstdlib>
#include <cstring>

namespace detseg {

bool use_huge_page_allocator() {
  static const bool active = [] {
    const char* env = std::getenv("DETSEG_HUGE_PAGES");
    if (env && std::strcmp(env, "0") == 0) return false;
    setenv("THP_MEM_ALLOC_ENABLE", "1", /*overwrite=*/0);
    const char* thp = std::getenv("THP_MEM_ALLOC_ENABLE");
    return thp != nullptr && std::strcmp(thp, "1") == 0;
  }();
  return active;
}

}  // namespace detseg
