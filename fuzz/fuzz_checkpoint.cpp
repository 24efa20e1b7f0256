// Harness (LibTorch): a .dsckpt checkpoint through read_checkpoint_metadata and read_checkpoint.
// The footer's CRC32C covers every byte, so a mutated file would almost always stop at the CRC
// check; the harness rewrites the CRC of inputs that have a footer, so the header and section
// parsing behind it are what gets fuzzed (the CRC check itself is tested in tests/train).
#include <cstring>

#include "detseg/io/crc32c.h"
#include "detseg/train/checkpoint.h"
#include "fuzz_common.h"

using namespace detseg;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  constexpr size_t kFooter = 12;  // "DSCKEND\0" + u32 CRC32C
  if (bytes.size() >= 24 + kFooter && bytes.compare(bytes.size() - kFooter, 8, std::string("DSCKEND\0", 8)) == 0) {
    const uint32_t crc = crc32c(bytes.data(), bytes.size() - kFooter);
    for (int k = 0; k < 4; ++k) bytes[bytes.size() - 4 + k] = static_cast<char>((crc >> (8 * k)) & 0xFF);
  }
  const std::string path = fuzz::write_scratch("model.dsckpt", bytes);
  fuzz::expect_clean([&] { read_checkpoint_metadata(path); });
  fuzz::expect_clean([&] { read_checkpoint(path); });
  return 0;
}
