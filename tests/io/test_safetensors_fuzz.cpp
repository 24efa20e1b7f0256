// Implements: regression tests for the safetensors headers the fuzzer found (fuzz/fuzz_safetensors.cpp;
// reproducers in fuzz/regressions/safetensors/): clean Errors, nothing allocated for a claimed shape.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "detseg/core/error.h"
#include "detseg/io/safetensors.h"
#include "test_paths.h"

namespace detseg {
namespace {

std::string error_of(const std::string& reproducer) {
  try {
    read_safetensors(std::string(DETSEG_SOURCE_DIR) + "/fuzz/regressions/safetensors/" + reproducer);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

// "data_offsets": [0, 4.4e72]: nlohmann converted the float to uint64 unchecked (UBSan).
TEST(SafetensorsFuzz, FloatsWhereIntegersBelongAreAnError) {
  const std::string msg = error_of("float_offset");
  EXPECT_NE(msg.find("data_offsets must be a list of integers >= 0, got 4.44444"), std::string::npos) << msg;
}

// "shape": [1e9, 1e9] backed by 4 bytes: at::empty ran on the claimed shape before the check.
TEST(SafetensorsFuzz, ShapeLargerThanItsBytesIsRefusedBeforeAllocating) {
  const std::string msg = error_of("shape_of_10_18_elements");
  EXPECT_NE(msg.find("tensor 'w' has 4 bytes for shape [1000000000, 1000000000]"), std::string::npos) << msg;
}

}  // namespace detseg
