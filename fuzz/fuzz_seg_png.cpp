// Harness: a segmentation label PNG through decode_label_png and the label-value check a data set
// applies (LabelValues), as SegmentationDataset::get does after reading the file.
// Input: byte 0 = num_classes (0: any), byte 1 = a void value (255: none), then the PNG bytes.
#include "detseg/data/image_codec.h"
#include "fuzz_common.h"

using namespace detseg;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int64_t num_classes = data[0];
  std::vector<int> void_values;
  if (data[1] != 255) void_values.push_back(data[1]);
  const std::string bytes(reinterpret_cast<const char*>(data + 2), size - 2);
  fuzz::expect_clean([&] {
    LabelImage label = decode_label_png(bytes, "label.png");
    if (label.height <= 0 || label.width <= 0 ||
        label.pixels.size() != static_cast<size_t>(label.height * label.width))
      fuzz::finding("decode_label_png returned an inconsistent image");
    LabelValues(num_classes, void_values).apply(label, "label.png");
  });
  return 0;
}
