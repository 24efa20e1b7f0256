// Implements: tests of Readers on the real data sets (bccd VOC, coco128 COCO, camvid folders) and on tiny bad files.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>

#include "data_test_files.h"
#include "detseg/core/files.h"
#include "detseg/data/readers/label_map.h"
#include "detseg/data/readers/seg_folder.h"
#include "detseg/data/readers/voc.h"
#include "detseg/data/readers/yolo.h"

using namespace detseg;
using detseg::datatest::error_of;
using detseg::datatest::shared_data;
namespace fs = std::filesystem;

namespace {
// A one-image VOC folder with `xml` as its annotation (and a real JPEG unless `with_image` is off).
std::string tiny_voc(const std::string& name, const std::string& xml, bool with_image = true) {
  const std::string dir = datatest::temp_dir(name);
  fs::create_directories(dir + "/Annotations");
  fs::create_directories(dir + "/JPEGImages");
  write_file_atomic(dir + "/Annotations/a.xml", xml);
  if (with_image)
    fs::copy_file(shared_data("bccd/BCCD/JPEGImages/BloodImage_00000.jpg"), dir + "/JPEGImages/a.jpg");
  return dir;
}

std::string voc_xml(const std::string& objects) {
  return "<?xml version=\"1.0\"?>\n<annotation>\n  <filename>a.jpg</filename>\n"
         "  <size><width>640</width><height>480</height><depth>3</depth></size>\n" + objects + "</annotation>\n";
}
}  // namespace

TEST(VocReader, BccdCountsAndKnownDefects) {
  CocoDataset d = read_voc(shared_data("bccd/BCCD"));
  EXPECT_EQ(d.images.size(), 364u);
  EXPECT_EQ(d.annotations.size(), 4888u);
  ASSERT_EQ(d.categories.size(), 3u);
  // No label map: names sorted, ids 1..3.
  EXPECT_EQ(d.categories[0].name, "Platelets");
  EXPECT_EQ(d.categories[1].name, "RBC");
  EXPECT_EQ(d.categories[2].name, "WBC");
  std::map<int64_t, int> per_class;
  std::vector<std::string> zero_area;
  int difficult = 0;
  for (const auto& a : d.annotations) {
    ++per_class[a.category_id];
    difficult += a.ignore;
    if (a.bbox[2] <= 0 || a.bbox[3] <= 0) zero_area.push_back(d.images[static_cast<size_t>(a.image_id - 1)].file_name);
  }
  EXPECT_EQ(per_class[1], 361);
  EXPECT_EQ(per_class[2], 4155);
  EXPECT_EQ(per_class[3], 372);
  EXPECT_EQ(difficult, 0);
  EXPECT_EQ(zero_area, (std::vector<std::string>{"BloodImage_00338.jpg", "BloodImage_00343.jpg"}));
  for (const auto& im : d.images) {
    EXPECT_EQ(im.width, 640);
    EXPECT_EQ(im.height, 480);
  }
}

TEST(VocReader, FirstBccdBoxAndTruncatedFlag) {
  CocoDataset d = read_voc(shared_data("bccd/BCCD"));
  // BloodImage_00338.xml: last object is a truncated WBC (244, 327, 509, 480).
  int64_t image_id = 0;
  for (const auto& im : d.images)
    if (im.file_name == "BloodImage_00338.jpg") image_id = im.id;
  const CocoAnnotation* wbc = nullptr;
  for (const auto& a : d.annotations)
    if (a.image_id == image_id && a.category_id == 3) wbc = &a;
  ASSERT_NE(wbc, nullptr);
  EXPECT_TRUE(wbc->truncated);
  EXPECT_DOUBLE_EQ(wbc->bbox[0], 244);
  EXPECT_DOUBLE_EQ(wbc->bbox[1], 327);
  EXPECT_DOUBLE_EQ(wbc->bbox[2], 265);
  EXPECT_DOUBLE_EQ(wbc->bbox[3], 153);
}

TEST(VocReader, SplitsAndLabelMap) {
  VocOptions o;
  o.split = "train";
  o.label_map = parse_label_map("RBC\nWBC\nPlatelets\n", "inline");
  CocoDataset train = read_voc(shared_data("bccd/BCCD"), o);
  EXPECT_EQ(train.images.size(), 205u);
  EXPECT_EQ(train.categories[0].name, "RBC");
  EXPECT_EQ(train.categories[0].id, 1);
  o.split = "val";
  EXPECT_EQ(read_voc(shared_data("bccd/BCCD"), o).images.size(), 87u);
  o.split = "nosuchsplit";
  EXPECT_NE(error_of([&] { read_voc(shared_data("bccd/BCCD"), o); }).find("nosuchsplit.txt: split list not found"),
            std::string::npos);
}

TEST(VocReader, DifficultBecomesIgnore) {
  const std::string dir = tiny_voc("voc_difficult", voc_xml(
      "  <object><name>RBC</name><difficult>1</difficult><truncated>0</truncated>\n"
      "    <bndbox><xmin>1</xmin><ymin>2</ymin><xmax>11</xmax><ymax>22</ymax></bndbox></object>\n"));
  CocoDataset d = read_voc(dir);
  ASSERT_EQ(d.annotations.size(), 1u);
  EXPECT_TRUE(d.annotations[0].ignore);
  EXPECT_FALSE(d.annotations[0].truncated);
  EXPECT_DOUBLE_EQ(d.annotations[0].area, 200);
}

TEST(VocReader, MalformedXmlNamesFileAndLine) {
  const std::string dir = tiny_voc("voc_malformed", voc_xml(
      "  <object><name>RBC</name>\n"
      "    <bndbox><xmin>1</xmin><ymin>2</ymax></bndbox></object>\n"));
  const std::string msg = error_of([&] { read_voc(dir); });
  EXPECT_NE(msg.find("Annotations/a.xml:6: malformed XML: <ymin> opened here is not closed by </ymin>"),
            std::string::npos) << msg;
}

TEST(VocReader, UnclosedElementAndTruncatedFile) {
  std::string msg = error_of([] { parse_xml("<annotation>\n<size>\n", "t.xml"); });
  EXPECT_EQ(msg, "t.xml:2: malformed XML: an element is not closed before the end of the file, or the markup is "
                 "broken there");
  msg = error_of([] { parse_xml("", "e.xml"); });
  EXPECT_NE(msg.find("e.xml:1: malformed XML: expected a root element"), std::string::npos) << msg;
  msg = error_of([] { parse_xml("<a></a><b/>", "two.xml"); });
  EXPECT_EQ(msg, "two.xml:1: malformed XML: expected end of file after </a>, got <b>");
}

TEST(XmlParser, CommentsEntitiesCdataAttributes) {
  XmlNode root = parse_xml("<?xml version='1.0'?><!-- c --><r a=\"x>y\">\n <n>A &amp; B</n><c><![CDATA[<raw>]]></c><e/></r>",
                           "ok.xml");
  EXPECT_EQ(root.name, "r");
  ASSERT_EQ(root.children.size(), 3u);
  EXPECT_EQ(root.child("n")->text, "A & B");
  EXPECT_EQ(root.child("n")->line, 2);
  EXPECT_EQ(root.child("c")->text, "<raw>");
  EXPECT_NE(root.child("e"), nullptr);
}

TEST(VocReader, BadNumberMissingFieldUnknownClassMissingImage) {
  std::string dir = tiny_voc("voc_number", voc_xml(
      "  <object><name>RBC</name>\n    <bndbox><xmin>1</xmin><ymin>two</ymin><xmax>5</xmax><ymax>6</ymax></bndbox></object>\n"));
  std::string msg = error_of([&] { read_voc(dir); });
  EXPECT_NE(msg.find("a.xml:6: <ymin> must be a number, got 'two'"), std::string::npos) << msg;

  dir = tiny_voc("voc_nobox", voc_xml("  <object><name>RBC</name></object>\n"));
  msg = error_of([&] { read_voc(dir); });
  EXPECT_NE(msg.find("a.xml:5: <object> has no <bndbox>"), std::string::npos) << msg;

  dir = tiny_voc("voc_unknown", voc_xml(
      "  <object><name>Neutrophil</name>\n    <bndbox><xmin>1</xmin><ymin>2</ymin><xmax>5</xmax><ymax>6</ymax></bndbox></object>\n"));
  VocOptions o;
  o.label_map = parse_label_map("RBC\nWBC\n", "labels.txt");
  msg = error_of([&] { read_voc(dir, o); });
  EXPECT_NE(msg.find("a.xml:5: unknown class 'Neutrophil'"), std::string::npos) << msg;

  dir = tiny_voc("voc_noimage", voc_xml(""), /*with_image=*/false);
  msg = error_of([&] { read_voc(dir); });
  EXPECT_NE(msg.find("image not found"), std::string::npos) << msg;
  EXPECT_NE(msg.find("JPEGImages/a.jpg"), std::string::npos) << msg;
}

TEST(XmlParser, DeepNestingIsAnErrorNotAStackOverflow) {
  std::string xml;
  for (int i = 0; i < 20000; ++i) xml += "<a>";
  for (int i = 0; i < 20000; ++i) xml += "</a>";
  EXPECT_EQ(error_of([&] { parse_xml(xml, "deep.xml"); }),
            "deep.xml:1: malformed XML: elements nested deeper than 100 levels");
}

TEST(XmlParser, CharacterReferencesBecomeUtf8) {
  XmlNode root = parse_xml("<n>caf&#233; &#x20AC;</n>", "ref.xml");
  EXPECT_EQ(root.text, "caf\xc3\xa9 \xe2\x82\xac");
  // tinyxml2 writes what an invalid reference names as it is (a surrogate's bytes, nothing for 0):
  // the fields detseg reads (class names, file names) are then refused as not UTF-8.
  EXPECT_EQ(parse_xml("<n>&#0;</n>", "z.xml").text, "");
  const std::string dir = tiny_voc("voc_surrogate", voc_xml(
      "  <object><name>&#xD800;</name>\n"
      "    <bndbox><xmin>1</xmin><ymin>2</ymin><xmax>5</xmax><ymax>6</ymax></bndbox></object>\n"));
  EXPECT_NE(error_of([&] { read_voc(dir); }).find("a.xml:5: <name> is not UTF-8 text"), std::string::npos);
}

TEST(VocReader, InvertedBoxIsAnErrorWithFileAndLine) {
  const std::string dir = tiny_voc("voc_inverted", voc_xml(
      "  <object><name>RBC</name>\n"
      "    <bndbox><xmin>50</xmin><ymin>2</ymin><xmax>10</xmax><ymax>6</ymax></bndbox></object>\n"));
  EXPECT_EQ(error_of([&] { read_voc(dir); }),
            dir + "/Annotations/a.xml:6: <bndbox> has xmax < xmin or ymax < ymin (50, 2, 10, 6)");
}

TEST(VocReader, NamesMustBeUtf8OrDeclaredLatin1) {
  const std::string object =
      "  <object><name>Blutk\xf6rperchen</name>\n"
      "    <bndbox><xmin>1</xmin><ymin>2</ymin><xmax>10</xmax><ymax>6</ymax></bndbox></object>\n";
  std::string dir = tiny_voc("voc_latin1_undeclared", voc_xml(object));
  EXPECT_EQ(error_of([&] { read_voc(dir); }),
            dir + "/Annotations/a.xml:5: <name> is not UTF-8 text (save the file as UTF-8, or declare its "
                  "encoding: <?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>)");
  std::string xml = voc_xml(object);
  xml.replace(0, xml.find("?>"), "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"");
  dir = tiny_voc("voc_latin1_declared", xml);
  CocoDataset d = read_voc(dir);
  ASSERT_EQ(d.categories.size(), 1u);
  EXPECT_EQ(d.categories[0].name, "Blutk\xc3\xb6rperchen");
}

TEST(LabelMap, PlainNumberedAndPbtxt) {
  LabelMap plain = parse_label_map("# classes\ncat\n\ndog\n", "p.txt");
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_EQ(plain.id_of("dog"), 2);
  EXPECT_EQ(plain.name_of(1), "cat");
  LabelMap numbered = parse_label_map("3 traffic light\n7 car\n", "n.txt");
  EXPECT_EQ(numbered.id_of("traffic light"), 3);
  EXPECT_EQ(numbered.name_of(7), "car");
  LabelMap pb = parse_label_map("item {\n  id: 1\n  name: 'RBC'\n}\nitem { id: 2 name: \"WBC\" }\n", "m.pbtxt");
  EXPECT_EQ(pb.id_of("RBC"), 1);
  EXPECT_EQ(pb.name_of(2), "WBC");
  EXPECT_EQ(error_of([] { parse_label_map("a\nb\na\n", "dup.txt"); }).find("dup.txt:3: duplicate class name 'a'"), 0u);
  EXPECT_NE(error_of([] { parse_label_map("item {\n  id: x\n}\n", "bad.pbtxt"); }).find("bad.pbtxt:2: label map id must be an integer"),
            std::string::npos);
}

TEST(SegFolder, CamvidTrainAndValPairs) {
  SegFolder train = read_seg_folder(camvid_options(shared_data("camvid/CamVid"), "train"));
  SegFolder val = read_seg_folder(camvid_options(shared_data("camvid/CamVid"), "val"));
  EXPECT_EQ(train.samples.size(), 92u);
  EXPECT_EQ(val.samples.size(), 101u);
  EXPECT_EQ(fs::path(val.samples[0].image_path).filename(), "0016E5_07959.png");
  EXPECT_EQ(fs::path(val.samples[0].label_path).parent_path().filename(), "valannot");
  std::string msg = error_of([] { read_seg_folder(camvid_options("/nonexistent", "train")); });
  EXPECT_NE(msg.find("/nonexistent/train: image folder not found"), std::string::npos) << msg;
}


TEST(YoloReader, BccdAsYoloReadsBackTheVocBoxes) {
  const std::string dir = datatest::bccd_as_yolo("yolo_bccd", 8);
  YoloOptions options;
  options.split = "val";
  const YoloDataset yolo = read_yolo(dir + "/data.yaml", options);
  VocOptions voc;
  voc.split = "test";
  const CocoDataset d = read_voc(shared_data("bccd/BCCD"), voc);
  ASSERT_EQ(yolo.coco.images.size(), 8u);
  EXPECT_EQ(fs::path(yolo.image_root), fs::path(dir));
  ASSERT_EQ(yolo.coco.categories.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(yolo.coco.categories[k].name, d.categories[k].name);
    EXPECT_EQ(yolo.coco.categories[k].id, d.categories[k].id);
  }
  size_t compared = 0;
  for (size_t i = 0; i < 8; ++i) {
    const CocoImage& im = yolo.coco.images[i];
    // Sorted file names: BloodImage_000xx in the same order as the VOC split list.
    EXPECT_EQ(im.file_name, "images/val/" + d.images[i].file_name);
    EXPECT_EQ(im.width, 640);
    EXPECT_EQ(im.height, 480);
    std::vector<const CocoAnnotation*> a, b;
    for (const auto& x : yolo.coco.annotations) if (x.image_id == im.id) a.push_back(&x);
    for (const auto& x : d.annotations) if (x.image_id == d.images[i].id) b.push_back(&x);
    ASSERT_EQ(a.size(), b.size()) << im.file_name;
    for (size_t j = 0; j < a.size(); ++j, ++compared) {
      EXPECT_EQ(a[j]->category_id, b[j]->category_id);
      for (int k = 0; k < 4; ++k) EXPECT_NEAR(a[j]->bbox[k], b[j]->bbox[k], 1e-4) << im.file_name << " box " << j;
    }
  }
  EXPECT_GT(compared, 50u);
}

TEST(YoloReader, PolygonsMissingLabelsAndErrorsWithFileAndLine) {
  const std::string dir = datatest::bccd_as_yolo("yolo_errors", 2);
  const std::string label = dir + "/labels/val/" + fs::path(read_yolo(dir + "/data.yaml", {"val"}).coco.images[0].file_name).stem().string() + ".txt";
  // A polygon line: its box is the polygon's extent, the polygon is kept in pixels.
  write_file_atomic(label, "2 0.1 0.1 0.3 0.1 0.3 0.5\n");
  YoloDataset y = read_yolo(dir + "/data.yaml", {"val"});
  ASSERT_EQ(y.coco.annotations[0].segmentation.polygons.size(), 1u);
  EXPECT_EQ(y.coco.annotations[0].category_id, 3);
  EXPECT_NEAR(y.coco.annotations[0].bbox[0], 64, 1e-9);
  EXPECT_NEAR(y.coco.annotations[0].bbox[3], 192, 1e-9);
  // No label file: an image without boxes.
  fs::remove(label);
  y = read_yolo(dir + "/data.yaml", {"val"});
  for (const auto& a : y.coco.annotations) EXPECT_NE(a.image_id, y.coco.images[0].id);
  write_file_atomic(label, "0 0.5 0.5 0.1 0.1\n7 0.5 0.5 0.1 0.1\n");
  EXPECT_EQ(error_of([&] { read_yolo(dir + "/data.yaml", {"val"}); }),
            label + ":2: class 7 is not in data.yaml's names (0..2)");
  write_file_atomic(label, "1 320 240 20 20\n");
  EXPECT_EQ(error_of([&] { read_yolo(dir + "/data.yaml", {"val"}); }),
            label + ":1: coordinate 320 is not normalised to [0, 1] (YOLO labels are fractions of the image size)");
  write_file_atomic(label, "1 0.5 0.5 0.1\n");
  EXPECT_EQ(error_of([&] { read_yolo(dir + "/data.yaml", {"val"}); }),
            label + ":1: expected 'class cx cy w h' or a polygon 'class x1 y1 x2 y2 x3 y3 ...', got 4 numbers");
  EXPECT_EQ(error_of([&] { read_yolo(dir + "/data.yaml", {"test"}); }), dir + "/data.yaml: test: missing (the split's images)");
}
