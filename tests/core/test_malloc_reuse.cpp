// malloc keeps a step's freed buffers (detseg/core/malloc_reuse.h): a 16 MiB block, which glibc's
// defaults would map fresh from the kernel (its first mmap threshold is 128 KiB), comes from the heap,
// and freeing it leaves the memory with the process for the next step.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "detseg/core/malloc_reuse.h"

TEST(MallocReuse, LargeBlocksComeFromTheHeapAndStayAfterFree) {
  const std::string& state = detseg::keep_freed_memory_for_reuse();  // test_main applied it already
  if (state == "as set in the environment") GTEST_SKIP() << "malloc tuned in the environment";
  ASSERT_EQ(state.rfind("freed memory kept for reuse", 0), 0u) << state;
  const size_t mapped_before = mallinfo2().hblkhd;
  const size_t block = 16u << 20;
  char* buffer = static_cast<char*>(std::malloc(block));
  ASSERT_NE(buffer, nullptr);
  std::memset(buffer, 1, block);
  EXPECT_EQ(mallinfo2().hblkhd, mapped_before) << "the 16 MiB block was mapped, not taken from the heap";
  std::free(buffer);
  // Kept: the heap still holds at least the freed block as free space (not trimmed back).
  EXPECT_GE(mallinfo2().fordblks, block);
}

TEST(MallocReuse, ActsOnceAndRepeatsItsAnswer) {
  const std::string& first = detseg::keep_freed_memory_for_reuse();
  EXPECT_EQ(&detseg::keep_freed_memory_for_reuse(), &first);
}
