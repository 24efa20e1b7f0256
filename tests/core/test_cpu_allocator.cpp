// Implements: tests of huge pages for CPU tensors (core/cpu_allocator.h): once asked for (unless
// DETSEG_HUGE_PAGES=0), tensors hold their values and a large buffer's 2 MiB pages carry the
// kernel's huge-page advice (VmFlags "hg" in /proc/self/smaps).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "detseg/core/cpu_allocator.h"

namespace {

// The VmFlags line of the mapping that holds address p, or "" when none is found.
std::string vm_flags_of(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(line);
    if (line.find(':') > line.find(' ') && (range >> std::hex >> lo >> dash >> hi) && dash == '-') {
      inside = addr >= lo && addr < hi;  // a mapping's header line: "lo-hi perms ..."
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

bool has_flag(const std::string& flags, const std::string& flag) {
  std::istringstream words(flags);
  std::string w;
  while (words >> w)
    if (w == flag) return true;
  return false;
}

}  // namespace

TEST(CpuAllocator, InstalledAndAdvisesLargeBuffers) {
  if (const char* env = std::getenv("DETSEG_HUGE_PAGES"); env && std::string(env) == "0") {
    EXPECT_FALSE(detseg::use_huge_page_allocator());
    return;
  }
  ASSERT_TRUE(detseg::use_huge_page_allocator());  // test_main's set_threads installed it already
  EXPECT_TRUE(detseg::use_huge_page_allocator());  // idempotent

  const at::Tensor big = at::arange(4 << 20, at::kFloat);  // 16 MiB: at least 7 whole huge pages
  EXPECT_EQ(big[12345].item<float>(), 12345.f);
  EXPECT_EQ(big.to(at::kDouble).sum().item<double>(), (4.0 * (1 << 20)) * ((4 << 20) - 1) / 2);  // exact in double
  const at::Tensor small = at::ones({1000});
  EXPECT_EQ(small.sum().item<float>(), 1000.f);

  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string setting;
  if (!thp || !std::getline(thp, setting) || setting.find("[never]") != std::string::npos)
    GTEST_SKIP() << "transparent huge pages unavailable here: the advice cannot be seen";
  // An address in the middle of the big buffer lies on a whole 2 MiB page that was advised.
  const std::string flags = vm_flags_of(static_cast<const char*>(big.data_ptr()) + (8 << 20));
  ASSERT_FALSE(flags.empty());
  EXPECT_TRUE(has_flag(flags, "hg")) << flags;
}
