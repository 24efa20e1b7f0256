// Harness (LibTorch): a .safetensors file through read_safetensors (u64 header length, JSON
// header, offsets and sizes against the data, dtypes) with its metadata.
#include <map>

#include "detseg/io/safetensors.h"
#include "fuzz_common.h"

using namespace detseg;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      fuzz::write_scratch("weights.safetensors", std::string(reinterpret_cast<const char*>(data), size));
  fuzz::expect_clean([&] {
    std::map<std::string, std::string> metadata;
    read_safetensors(path, &metadata);
  });
  return 0;
}
