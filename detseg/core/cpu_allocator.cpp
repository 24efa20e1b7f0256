#include "detseg/core/cpu_allocator.h"

#include <c10/core/CPUAllocator.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace detseg {
namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
constexpr size_t kMinBytes = size_t{4} << 20;

// Allocation and freeing stay the default allocator's (glibc reuses freed blocks, and LibTorch's
// memory reporting keeps working); only the advice is added.
class HugePageAllocator final : public c10::Allocator {
 public:
  explicit HugePageAllocator(c10::Allocator* fallback) : fallback_(fallback) {}

  c10::DataPtr allocate(size_t n) const override {
    c10::DataPtr p = fallback_->allocate(n);
    if (n >= kMinBytes) {
      const auto first = reinterpret_cast<uintptr_t>(p.get());
      const uintptr_t begin = (first + kHugePage - 1) / kHugePage * kHugePage;
      const uintptr_t end = (first + n) / kHugePage * kHugePage;
      if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // advice only
    }
    return p;
  }
  c10::DeleterFnPtr raw_deleter() const override { return fallback_->raw_deleter(); }

 private:
  c10::Allocator* fallback_;
};

}  // namespace

bool use_huge_page_allocator() {
  static const bool active = [] {
    const char* env = std::getenv("DETSEG_HUGE_PAGES");
    if (env && std::strcmp(env, "0") == 0) return false;
    static HugePageAllocator allocator(c10::GetDefaultCPUAllocator());
    c10::SetCPUAllocator(&allocator, /*priority=*/1);
    return true;
  }();
  return active;
}

}  // namespace detseg
