// Implements: regression tests for inputs the VOC fuzzer found (fuzz/fuzz_voc_xml.cpp; reproducers
// in fuzz/regressions/voc_xml/): what `detseg convert voc` writes must read back, or fail cleanly.
// (Its Latin-1 class name and "&#233;" findings are tested in test_readers.cpp, Voc*Utf8*.)
#include <gtest/gtest.h>

#include "data_test_files.h"
#include "detseg/core/files.h"
#include "detseg/data/readers/coco.h"
#include "detseg/data/readers/label_map.h"
#include "detseg/data/readers/voc.h"
#include "test_paths.h"

using namespace detseg;
using detseg::datatest::error_of;

// A class name holding a byte that is not UTF-8 (a Latin-1 "é") was written into the COCO JSON
// as is, and simdjson then refused the whole file. The VOC reader now refuses such names; the
// writer refuses such a string from any source (a label map file, say).
TEST(ReadersFuzz, JsonWriterRefusesStringsThatAreNotUtf8) {
  const std::string dir = datatest::temp_dir("readers_fuzz_utf8");
  CocoDataset d;
  d.images.push_back({1, "a.jpg", 4, 4});
  d.categories.push_back({1, "caf\xe9", ""});
  const std::string msg = error_of([&] { write_coco(d, dir + "/out.json"); });
  EXPECT_EQ(msg, "cannot write \"caf\\xe9\" to JSON: not valid UTF-8");
  EXPECT_FALSE(file_exists(dir + "/out.json"));
  for (const char* bad : {"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82", "\xff"}) {
    d.categories[0].name = bad;  // overlong, surrogate, past U+10FFFF, truncated, never UTF-8
    EXPECT_NE(error_of([&] { write_coco(d, dir + "/out.json"); }).find("not valid UTF-8"), std::string::npos) << bad;
  }
  d.categories[0].name = "caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x90\x9f";  // é, 中, a fish: fine
  write_coco(d, dir + "/out.json");
  EXPECT_EQ(read_coco(dir + "/out.json").categories[0].name, d.categories[0].name);
}

// An id past int64 threw std::out_of_range from std::stoll, which nothing catches (`detseg convert
// voc --label-map` died on std::terminate).
TEST(ReadersFuzz, LabelMapIdsPastInt64AreAnError) {
  std::string msg = error_of([] { parse_label_map("1 RBC\n99999999999999999999 WBC\n", "labels.txt"); });
  EXPECT_EQ(msg, "labels.txt:2: label map id 99999999999999999999 is out of range");
  msg = error_of([] { parse_label_map("item {\n  id: 99999999999999999999\n  name: 'RBC'\n}\n", "labels.pbtxt"); });
  EXPECT_EQ(msg, "labels.pbtxt:2: label map id 99999999999999999999 is out of range");
  EXPECT_EQ(parse_label_map("9223372036854775807 RBC\n", "labels.txt").entries[0].id, INT64_MAX);
}

// <width>9.2e21</width> was cast from double to int64: undefined behaviour (UBSan), in practice
// a negative or garbage width. Reproducer: fuzz/regressions/voc_xml/width_past_int64.
TEST(ReadersFuzz, VocImageSizePastInt64IsAnError) {
  const std::string dir = datatest::temp_dir("readers_fuzz_voc_size");
  std::filesystem::create_directories(dir + "/Annotations");
  write_file_atomic(dir + "/Annotations/a.xml",
                    read_file(std::string(DETSEG_SOURCE_DIR) + "/fuzz/regressions/voc_xml/width_past_int64"));
  VocOptions options;
  options.check_images = false;
  const std::string msg = error_of([&] { read_voc(dir, options); });
  EXPECT_NE(msg.find("a.xml:1: image size 9.22337e+21x480 is out of range"), std::string::npos) << msg;
  write_file_atomic(dir + "/Annotations/a.xml", "<annotation><size><width>0.5</width><height>4</height></size></annotation>");
  EXPECT_NE(error_of([&] { read_voc(dir, options); }).find("image size must be positive, got 0.5x4"), std::string::npos);
}

// <ymax>3333333333333333333176</ymax> gave a box height of 3.3e21, which write_coco spelt as 22
// digits; reading the converted file back refused it as an integer past 64 bits. Reproducer:
// fuzz/regressions/voc_xml/huge_whole_coordinate.
TEST(ReadersFuzz, HugeWholeNumbersReadBack) {
  const std::string dir = datatest::temp_dir("readers_fuzz_huge_number");
  CocoDataset d;
  d.images.push_back({1, "a.jpg", 4, 4});
  d.categories.push_back({1, "a", ""});
  CocoAnnotation a;
  a.id = a.image_id = a.category_id = 1;
  a.bbox[1] = 89;
  a.bbox[3] = 3333333333333333333176.0 - 89;
  a.area = 1e300;
  d.annotations.push_back(a);
  write_coco(d, dir + "/out.json");
  const CocoDataset back = read_coco(dir + "/out.json");
  EXPECT_EQ(back.annotations[0].bbox[3], a.bbox[3]);
  EXPECT_EQ(back.annotations[0].area, 1e300);
}
