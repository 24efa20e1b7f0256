// Implements: tests of `detseg convert voc` end to end: real bccd split to COCO JSON, read back; errors exit 1 and write nothing.
#include <gtest/gtest.h>

#include <filesystem>

#include "command_runner.h"
#include "data_test_util.h"
#include "detseg/core/files.h"
#include "detseg/data/readers/coco.h"
#include "detseg/data/readers/voc.h"
#include "test_paths.h"

using namespace detseg;
namespace fs = std::filesystem;

namespace {
using CliRun = detseg::testing::CommandRun;

CliRun detseg_cli(const std::string& args) {
  return detseg::testing::run_command(std::string(DETSEG_BINARY) + " " + args);
}
}  // namespace

TEST(ConvertVoc, BccdValSplitRoundTrips) {
  const std::string dir = datatest::temp_dir("convert");
  const std::string out = dir + "/val.json";
  CliRun r = detseg_cli("convert voc " + datatest::shared_data("bccd/BCCD") + " --split val -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("87 images"), std::string::npos) << r.output;
  CocoDataset d = read_coco(out);
  EXPECT_EQ(d.images.size(), 87u);
  ASSERT_EQ(d.categories.size(), 3u);
  EXPECT_EQ(d.categories[1].name, "RBC");
  size_t boxes = 0;
  for (const auto& a : d.annotations) boxes += a.image_id == d.images[0].id;
  EXPECT_GT(boxes, 0u);
}

TEST(ConvertVoc, LabelMapOrderAndUnknownClass) {
  const std::string dir = datatest::temp_dir("convert_labels");
  write_file_atomic(dir + "/labels.txt", "WBC\nRBC\nPlatelets\n");
  CliRun r = detseg_cli("convert voc " + datatest::shared_data("bccd/BCCD") + " --split test --label-map " + dir +
                     "/labels.txt -o " + dir + "/test.json");
  ASSERT_EQ(r.code, 0) << r.output;
  CocoDataset d = read_coco(dir + "/test.json");
  EXPECT_EQ(d.images.size(), 72u);
  EXPECT_EQ(d.categories[0].name, "WBC");
  EXPECT_EQ(d.categories[0].id, 1);

  write_file_atomic(dir + "/two.txt", "WBC\nRBC\n");
  r = detseg_cli("convert voc " + datatest::shared_data("bccd/BCCD") + " --label-map " + dir + "/two.txt -o " + dir +
                 "/bad.json");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("unknown class 'Platelets'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(".xml:"), std::string::npos) << r.output;  // file:line of the object
  EXPECT_FALSE(fs::exists(dir + "/bad.json"));
}

TEST(ConvertVoc, MalformedXmlExitsOneWithFileAndLine) {
  const std::string dir = datatest::temp_dir("convert_bad");
  fs::create_directories(dir + "/voc/Annotations");
  fs::create_directories(dir + "/voc/JPEGImages");
  write_file_atomic(dir + "/voc/Annotations/x.xml", "<annotation>\n<size><width>4</width>\n</annotation>\n");
  CliRun r = detseg_cli("convert voc " + dir + "/voc -o " + dir + "/out.json");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("x.xml:2: malformed XML: <size> opened here is not closed by </size>"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir + "/out.json"));
  r = detseg_cli("convert voc " + dir + "/nope -o " + dir + "/out.json");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("nope: not a directory"), std::string::npos) << r.output;
}

TEST(ConvertVoc, DifficultAndTruncatedFlagsSurvive) {
  const std::string dir = datatest::temp_dir("convert_difficult");
  fs::create_directories(dir + "/voc/Annotations");
  fs::create_directories(dir + "/voc/JPEGImages");
  fs::copy_file(datatest::shared_data("bccd/BCCD/JPEGImages/BloodImage_00000.jpg"), dir + "/voc/JPEGImages/a.jpg");
  write_file_atomic(dir + "/voc/Annotations/a.xml",
                    "<annotation><filename>a.jpg</filename><size><width>640</width><height>480</height></size>\n"
                    "<object><name>RBC</name><difficult>1</difficult>"
                    "<bndbox><xmin>1</xmin><ymin>2</ymin><xmax>11</xmax><ymax>22</ymax></bndbox></object>\n"
                    "<object><name>RBC</name><difficult>0</difficult><truncated>1</truncated>"
                    "<bndbox><xmin>5</xmin><ymin>5</ymin><xmax>9</xmax><ymax>9</ymax></bndbox></object></annotation>\n");
  CliRun r = detseg_cli("convert voc " + dir + "/voc -o " + dir + "/out.json");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("2 boxes (1 difficult)"), std::string::npos) << r.output;
  CocoDataset d = read_coco(dir + "/out.json");
  ASSERT_EQ(d.annotations.size(), 2u);
  EXPECT_TRUE(d.annotations[0].ignore);
  EXPECT_FALSE(d.annotations[1].ignore);
  EXPECT_FALSE(d.annotations[0].truncated);
  EXPECT_TRUE(d.annotations[1].truncated);
  EXPECT_DOUBLE_EQ(d.annotations[0].bbox[2], 10);
  EXPECT_DOUBLE_EQ(d.annotations[0].bbox[3], 20);
}

TEST(ConvertVoc, OddNamesAndBoxesRoundTripThroughTheCocoReader) {
  // Whatever `convert voc` writes, detseg's COCO reader reads back: quotes, backslashes, entities,
  // non-ASCII names (UTF-8, and Latin-1 declared as such), a folder-less file name with spaces,
  // fractional and zero-size boxes.
  const std::string dir = datatest::temp_dir("convert_odd");
  fs::create_directories(dir + "/voc/Annotations");
  fs::create_directories(dir + "/voc/JPEGImages");
  fs::copy_file(datatest::shared_data("bccd/BCCD/JPEGImages/BloodImage_00000.jpg"),
                dir + "/voc/JPEGImages/blood cell \xc3\xa9.jpg");
  fs::copy_file(datatest::shared_data("bccd/BCCD/JPEGImages/BloodImage_00000.jpg"), dir + "/voc/JPEGImages/b.jpg");
  auto object = [](const std::string& name, const std::string& box) {
    return "<object><name>" + name + "</name><bndbox>" + box + "</bndbox></object>\n";
  };
  write_file_atomic(dir + "/voc/Annotations/a.xml",
                    "<annotation><filename>blood cell \xc3\xa9.jpg</filename>\n"
                    "<size><width>640</width><height>480</height></size>\n" +
                        object("say \"hi\" &amp; C:\\cells &lt;1&gt;",
                               "<xmin>1.5</xmin><ymin>2.25</ymin><xmax>11</xmax><ymax>22.75</ymax>") +
                        object("Blutk\xc3\xb6rperchen &#x1F52C;", "<xmin>5</xmin><ymin>5</ymin><xmax>5</xmax><ymax>9</ymax>") +
                        "</annotation>\n");
  write_file_atomic(dir + "/voc/Annotations/b.xml",
                    "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>\n<annotation><filename>b.jpg</filename>\n"
                    "<size><width>640</width><height>480</height></size>\n" +
                        object("Gr\xfc\xdf" "e", "<xmin>0</xmin><ymin>0</ymin><xmax>640</xmax><ymax>480</ymax>") +
                        "</annotation>\n");
  CliRun r = detseg_cli("convert voc " + dir + "/voc -o " + dir + "/out.json");
  ASSERT_EQ(r.code, 0) << r.output;
  CocoDataset d = read_coco(dir + "/out.json");
  ASSERT_EQ(d.images.size(), 2u);
  EXPECT_EQ(d.images[0].file_name, "blood cell \xc3\xa9.jpg");
  std::vector<std::string> names;
  for (const auto& c : d.categories) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"Blutk\xc3\xb6rperchen \xf0\x9f\x94\xac", "Gr\xc3\xbc\xc3\x9f" "e",
                                             "say \"hi\" & C:\\cells <1>"}));
  ASSERT_EQ(d.annotations.size(), 3u);
  EXPECT_DOUBLE_EQ(d.annotations[0].bbox[0], 1.5);
  EXPECT_DOUBLE_EQ(d.annotations[0].bbox[3], 20.5);
  EXPECT_DOUBLE_EQ(d.annotations[1].bbox[2], 0.0);  // zero width: kept here, dropped (and counted) by training

  // An inverted box stops the conversion at its file and line, and nothing is written.
  write_file_atomic(dir + "/voc/Annotations/b.xml",
                    "<annotation><filename>b.jpg</filename><size><width>640</width><height>480</height></size>\n" +
                        object("RBC", "<xmin>9</xmin><ymin>0</ymin><xmax>3</xmax><ymax>4</ymax>") + "</annotation>\n");
  r = detseg_cli("convert voc " + dir + "/voc -o " + dir + "/bad.json");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("b.xml:2: <bndbox> has xmax < xmin"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir + "/bad.json"));
}

TEST(ConvertYolo, BccdAsYoloConvertsToTheSameCoco) {
  const std::string dir = datatest::bccd_as_yolo("convert_yolo", 5);
  CliRun r = detseg_cli("convert yolo " + dir + "/data.yaml --split val -o " + dir + "/val.json");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("5 images"), std::string::npos) << r.output;
  const CocoDataset d = read_coco(dir + "/val.json");
  VocOptions voc;
  voc.split = "test";
  const CocoDataset truth = read_voc(datatest::shared_data("bccd/BCCD"), voc);
  ASSERT_EQ(d.images.size(), 5u);
  EXPECT_EQ(d.images[0].file_name, "images/val/" + truth.images[0].file_name);
  size_t n = 0;
  for (const auto& a : truth.annotations) n += a.image_id <= truth.images[4].id ? 1 : 0;
  ASSERT_EQ(d.annotations.size(), n);
  for (size_t i = 0; i < n; ++i)
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(d.annotations[i].bbox[k], truth.annotations[i].bbox[k], 1e-4);
  r = detseg_cli("convert yolo " + dir + "/nope.yaml -o " + dir + "/x.json");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("nope.yaml: not found"), std::string::npos) << r.output;
}
