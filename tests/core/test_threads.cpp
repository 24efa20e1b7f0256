// Implements: a guard that the library's CPU kernels really run in parallel: ATen's at::parallel_for
// is an inline OpenMP loop, serial unless the library is compiled with -fopenmp (CMakeLists.txt).
#include <gtest/gtest.h>

#include <algorithm>

#include "detseg/core/threads.h"

TEST(Threads, LibraryParallelForUsesEveryThread) {
  const int before = detseg::current_threads();
  EXPECT_EQ(detseg::set_threads(1), 1);
  EXPECT_EQ(detseg::threads_reached_by_parallel_for(), 1);
  if (detseg::hardware_threads() >= 2) {
    EXPECT_EQ(detseg::set_threads(2), 2);
    EXPECT_EQ(detseg::threads_reached_by_parallel_for(), 2) << "at::parallel_for ran serially: built without OpenMP?";
  }
  detseg::set_threads(before);
}
