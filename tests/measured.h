// One line per learning test with what it measured, under whatever kernel set ran it:
// scripts/test_kernel_sets.sh collects these lines, so the ranges in the tests' comments can be
// checked against any machine's CI log.
#pragma once

#include <cstdio>
#include <initializer_list>
#include <string>

#include <gtest/gtest.h>

#include "detseg/eval/evaluator.h"

namespace detseg::testing {

inline void print_measured(const Metrics& metrics, std::initializer_list<const char*> names) {
  std::string line = "[ measured ] ";
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info != nullptr) line += std::string(info->test_suite_name()) + "." + info->name() + ":";
  for (const char* name : names) {
    char value[32];
    std::snprintf(value, sizeof value, " %s %.4f", name, metrics.get(name));
    line += value;
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace detseg::testing
