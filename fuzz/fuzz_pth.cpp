// Harness (LibTorch): torch.save files through parse_pth_bytes (LibTorch's zip reader, then
// detseg's pickle subset) and flatten_tensors, as a fine-tune checkpoint is read.
// Input: a whole .pth (starting "PK"), or anything else as the pickle itself: the harness wraps it
// in a valid container (with four small storages, data/0..3) so mutations reach the unpickler
// instead of dying in the zip headers.
#include <caffe2/serialize/inline_container.h>

#include "detseg/io/pth_reader.h"
#include "fuzz_common.h"

using namespace detseg;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.compare(0, 2, "PK") != 0) {
    std::string zip;
    {
      caffe2::serialize::PyTorchStreamWriter writer([&](const void* p, size_t n) {
        zip.append(static_cast<const char*>(p), n);
        return n;
      });
      writer.writeRecord("data.pkl", bytes.data(), bytes.size());
      writer.writeRecord("byteorder", "little", 6);
      const std::string storage(64, '\x01');
      for (int k = 0; k < 4; ++k) writer.writeRecord("data/" + std::to_string(k), storage.data(), storage.size());
      writer.writeEndOfFile();
    }
    bytes = std::move(zip);
  }
  fuzz::expect_clean([&] {
    PickleRef root = parse_pth_bytes(bytes, "fuzz.pth");
    flatten_tensors(*root);
  });
  return 0;
}
