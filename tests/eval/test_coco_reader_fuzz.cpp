// Implements: regression tests for inputs the COCO fuzzers found (fuzz/fuzz_coco_gt.cpp,
// fuzz/fuzz_coco_eval_pair.cpp; reproducers in fuzz/regressions/coco_*/).
#include <gtest/gtest.h>

#include <filesystem>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/data/readers/coco.h"
#include "temp_dir.h"
#include "test_paths.h"

using namespace detseg;
namespace fs = std::filesystem;

namespace {
std::string temp_file(const std::string& name) {
  static const detseg::testing::TempDir dir_temp("test_coco_reader_fuzz");
  const fs::path dir = dir_temp.path();
  fs::create_directories(dir);
  return (dir / name).string();
}

std::string error_of(const std::string& json) {
  const std::string path = temp_file("in.json");
  write_file_atomic(path, json);
  try {
    read_coco(path);
  } catch (const Error& e) {
    return std::string(e.what()).substr(path.size() + 2);
  }
  return "no error";
}
}  // namespace

// write_coco wrote ids through a double: image id 2^63 - 1 read back as -2^63 (via 2^63, which
// the reader then wrapped to a negative int64), and category id 2^53 + 1 as 2^53.
// Reproducer: fuzz/regressions/coco_gt/ids_above_2_53.
TEST(CocoReaderFuzz, IdsAbove2To53RoundTripExactly) {
  const std::string path = temp_file("big_ids.json");
  write_file_atomic(path, read_file(std::string(DETSEG_SOURCE_DIR) + "/fuzz/regressions/coco_gt/ids_above_2_53"));
  const CocoDataset d = read_coco(path);
  ASSERT_EQ(d.images.size(), 1u);
  EXPECT_EQ(d.images[0].id, INT64_MAX);
  EXPECT_EQ(d.categories[0].id, 9007199254740993);
  write_coco(d, temp_file("again.json"));
  const CocoDataset again = read_coco(temp_file("again.json"));
  EXPECT_EQ(again.images[0].id, INT64_MAX);
  EXPECT_EQ(again.categories[0].id, 9007199254740993);
  EXPECT_EQ(again.annotations[0].image_id, INT64_MAX);
  EXPECT_EQ(again.annotations[0].category_id, 9007199254740993);
}

TEST(CocoReaderFuzz, IdsAboveInt64AreAnError) {
  EXPECT_EQ(error_of(R"({"images": [{"id": 9223372036854775808}]})"),
            "images[0].id: integer 9223372036854775808 is out of range");
  EXPECT_EQ(error_of(R"({"images": [{"id": 1}], "categories": [{"id": 1}],
                         "annotations": [{"id": 18446744073709551615, "image_id": 1, "category_id": 1,
                                          "bbox": [0, 0, 1, 1]}]})"),
            "annotations[0].id: integer 18446744073709551615 is out of range");
}

// An RLE "size" of [4809007199254740993, 640] made height*width overflow int64 (UBSan) when its
// counts were checked against it. Found by fuzz_coco_eval_pair.
TEST(CocoReaderFuzz, HugeRleSizesDoNotOverflow) {
  const std::string images = R"({"images": [{"id": 1, "width": 4, "height": 4}], "categories": [{"id": 1}],
                                 "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1],
                                 "segmentation": {"size": )";
  EXPECT_EQ(error_of(images + R"([4809007199254740993, 640], "counts": [1, 2]}}]})"),
            "annotations[0].segmentation.counts: counts sum to 3, not height*width = 4809007199254740993*640");
  EXPECT_EQ(error_of(images + R"([4294967296, 4294967296], "counts": [1, 2]}}]})"),
            "annotations[0].segmentation.counts: counts sum to 3, not height*width = 4294967296*4294967296");
  EXPECT_EQ(error_of(images + R"([2, 3], "counts": [1, 2]}}]})"),
            "annotations[0].segmentation.counts: counts sum to 3, not height*width = 6");
}
