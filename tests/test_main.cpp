// Implements: the shared GoogleTest main: tests run with all cores, like the CLI.
#include <gtest/gtest.h>

#include "detseg/core/threads.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  detseg::set_threads(0);
  return RUN_ALL_TESTS();
}
