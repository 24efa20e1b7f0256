// Harness: one Pascal VOC annotation XML through read_voc (the XML parser and the VOC fields on
// top), optionally with a label map (plain or pbtxt), then what `detseg convert voc` does with it:
// write_coco, and the written file must read back with read_coco as the same data.
// Input: XML[, separator, label map text].
#include "coco_compare.h"
#include "detseg/data/readers/voc.h"
#include "fuzz_common.h"

using namespace detseg;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts = fuzz::split_parts(data, size);
  fuzz::write_scratch("voc/Annotations/a.xml", parts[0]);
  fuzz::expect_clean([&] {
    VocOptions options;
    options.check_images = false;  // no JPEGImages/: the XML is what is fuzzed
    if (parts.size() > 1) options.label_map = parse_label_map(parts[1], "labels.txt");
    CocoDataset d = read_voc((fuzz::scratch_dir() / "voc").string(), options);
    fuzz::check_coco_round_trip(d, "voc.json");
  });
  return 0;
}
