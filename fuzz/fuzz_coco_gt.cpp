// Harness: a COCO instances JSON (ground truth) through read_coco, and what it read written back
// with write_coco and read again (the round trip `detseg convert` relies on).
#include "coco_compare.h"
#include "fuzz_common.h"

using namespace detseg;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("gt.json", std::string(reinterpret_cast<const char*>(data), size));
  fuzz::expect_clean([&] {
    CocoDataset gt = read_coco(path);
    fuzz::check_coco_round_trip(gt, "gt_again.json");
  });
  return 0;
}
