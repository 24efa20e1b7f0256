// Implements: the shared GoogleTest main: tests run with all cores and malloc's settings, like the
// CLI.
#include <gtest/gtest.h>

#include "detseg/core/malloc_reuse.h"
#include "detseg/core/threads.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  detseg::keep_freed_memory_for_reuse();
  detseg::set_threads(0);
  return RUN_ALL_TESTS();
}
