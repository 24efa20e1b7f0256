// Implements: regression tests for the checkpoint headers the fuzzer found (fuzz/fuzz_checkpoint.cpp;
// reproducers in fuzz/regressions/checkpoint/, their CRC32C valid): sizes a header claims are
// checked against the file before anything that large is allocated.
#include <gtest/gtest.h>

#include <filesystem>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/train/checkpoint.h"
#include "error_of.h"
#include "test_paths.h"

namespace detseg {
namespace {

std::string reproducer(const std::string& name) {
  return std::string(DETSEG_SOURCE_DIR) + "/fuzz/regressions/checkpoint/" + name;
}

using detseg::testing::error_of;

}  // namespace

// A header length of 1 GB in a 163-byte file: read_checkpoint_metadata allocated and cleared 1 GB
// before finding the file short (every `detseg eval` look at a damaged file).
TEST(CheckpointFuzz, HeaderLengthBeyondTheFileIsRefusedBeforeAllocating) {
  const std::string path = reproducer("header_length_1_gb");
  std::string msg = error_of([&] { read_checkpoint_metadata(path); });
  EXPECT_NE(msg.find(": truncated checkpoint (header needs 1073741847 bytes, the file has 163)"), std::string::npos)
      << msg;
  msg = error_of([&] { read_checkpoint(path); });
  EXPECT_NE(msg.find(": truncated checkpoint"), std::string::npos) << msg;
}

// A tensor of shape [1e9, 1e9] backed by 4 bytes: at::empty ran on the claimed shape before the
// size was compared with the payload.
TEST(CheckpointFuzz, ShapeLargerThanThePayloadIsRefusedBeforeAllocating) {
  const std::string msg = error_of([&] { read_checkpoint(reproducer("shape_of_10_18_elements")); });
  EXPECT_NE(msg.find("tensor 'w' has inconsistent size/offset"), std::string::npos) << msg;
}

// A tensor size of 4e72 in the header: nlohmann converted the float to uint64 unchecked (UBSan);
// the same in safetensors headers was found by fuzz_safetensors.
TEST(CheckpointFuzz, FloatsWhereIntegersBelongAreAnError) {
  const std::string msg = error_of([&] { read_checkpoint(reproducer("float_size")); });
  EXPECT_NE(msg.find("tensor 'w' has a malformed shape/offset/size"), std::string::npos) << msg;
}

}  // namespace detseg
