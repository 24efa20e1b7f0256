// Implements: tests of the COCO JSON reader/writer (data/readers/coco.cpp) on the bundled coco128
// annotations (counts from its README) and on small hand-written files with errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/data/readers/coco.h"
#include "detseg/data/readers/rle.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using namespace detseg;

namespace {

const std::string kCoco128 =
    std::string(DETSEG_SHARED_DIR) + "/data/coco128/annotations/instances_val2017.json";

const fs::path& reader_dir() {
  static const detseg::testing::TempDir dir("test_coco_reader");
  return dir.path();
}

std::string temp_file(const std::string& name, const std::string& text) {
  fs::path dir = reader_dir();
  fs::create_directories(dir);
  std::string path = (dir / name).string();
  write_file_atomic(path, text);
  return path;
}

// Runs `f`, expects an Error whose message contains every one of `parts`.
template <typename F>
void expect_error(F f, std::initializer_list<std::string> parts) {
  try {
    f();
    FAIL() << "no error thrown";
  } catch (const Error& e) {
    for (const auto& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what() << "\nmissing: " << part;
  }
}

const char* kSmallGt = R"({
  "images": [{"id": 7, "file_name": "a.jpg", "width": 10, "height": 8},
             {"id": 3, "file_name": "b.jpg", "width": 4, "height": 4}],
  "categories": [{"id": 5, "name": "cat", "supercategory": "animal"}, {"id": 2, "name": "dog"}],
  "annotations": [
    {"id": 1, "image_id": 7, "category_id": 5, "bbox": [1, 2, 3, 4], "area": 10.5, "iscrowd": 0,
     "segmentation": [[1, 2, 4, 2, 4, 6, 1, 6]]},
    {"id": 2, "image_id": 7, "category_id": 2, "bbox": [0, 0, 2, 2], "area": 4, "iscrowd": 1,
     "segmentation": {"size": [8, 10], "counts": [0, 2, 6, 2, 70]}},
    {"id": 3, "image_id": 7, "category_id": 2, "bbox": [2.5, 1.25, 1, 1],
     "segmentation": {"size": [8, 10], "counts": "026V2"}}
  ]})";

}  // namespace

TEST(CocoReader, Coco128CountsMatchReadme) {
  CocoDataset data = read_coco(kCoco128);
  EXPECT_EQ(data.images.size(), 128u);
  EXPECT_EQ(data.annotations.size(), 939u);
  EXPECT_EQ(data.categories.size(), 80u);
  int polygons = 0, rles = 0, crowd = 0, person = 0;
  std::unordered_map<int64_t, int> used;
  for (const auto& a : data.annotations) {
    polygons += a.segmentation.kind == CocoSegmentation::kPolygons;
    rles += a.segmentation.kind == CocoSegmentation::kRle;
    crowd += a.iscrowd;
    person += a.category_id == 1;
    used[a.category_id]++;
    if (a.segmentation.kind == CocoSegmentation::kRle) {
      // Every crowd RLE covers the whole image, and its tight box is the annotated box.
      const CocoImage& im = data.images[data.image_index.at(a.image_id)];
      EXPECT_EQ(a.segmentation.rle.height, im.height);
      EXPECT_EQ(a.segmentation.rle.width, im.width);
      uint64_t total = 0;
      for (auto c : a.segmentation.rle.counts) total += c;
      EXPECT_EQ(total, static_cast<uint64_t>(im.height * im.width));
    }
  }
  EXPECT_EQ(polygons, 929);
  EXPECT_EQ(rles, 10);
  EXPECT_EQ(crowd, 10);
  EXPECT_EQ(person, 259);
  EXPECT_EQ(used.size(), 71u);
  int empty = 0;
  for (const auto& list : data.annotations_by_image) empty += list.empty();
  EXPECT_EQ(empty, 2);
  // The first annotation, as in the file.
  const CocoAnnotation& a = data.annotations[0];
  EXPECT_EQ(a.id, 1774);
  EXPECT_EQ(a.image_id, 74);
  EXPECT_EQ(a.category_id, 18);
  EXPECT_DOUBLE_EQ(a.bbox[0], 61.87);
  EXPECT_DOUBLE_EQ(a.bbox[3], 103.18);
  EXPECT_DOUBLE_EQ(a.area, 18234.62355);
  ASSERT_EQ(a.segmentation.polygons.size(), 1u);
  EXPECT_EQ(a.segmentation.polygons[0].size(), 116u);
  const CocoImage& im = data.images[data.image_index.at(9)];
  EXPECT_EQ(im.file_name, "000000000009.jpg");
  EXPECT_EQ(im.width, 640);
  EXPECT_EQ(im.height, 480);
}

TEST(CocoReader, SmallFileFieldsAndRleForms) {
  CocoDataset data = read_coco(temp_file("small.json", kSmallGt));
  ASSERT_EQ(data.annotations.size(), 3u);
  EXPECT_EQ(data.category_index.at(5), 0);
  EXPECT_EQ(data.category_index.at(2), 1);
  EXPECT_EQ(data.categories[1].supercategory, "");
  EXPECT_EQ(data.image_index.at(3), 1);
  EXPECT_EQ(data.annotations_by_image[0].size(), 3u);
  EXPECT_TRUE(data.annotations_by_image[1].empty());
  const auto& crowd = data.annotations[1];
  EXPECT_TRUE(crowd.iscrowd);
  EXPECT_EQ(crowd.segmentation.rle.counts, (std::vector<uint32_t>{0, 2, 6, 2, 70}));
  // Compressed "026V2": 0, 2, 6, then "V2" = 70 plus the count two back (2) = 72.
  const auto& compressed = data.annotations[2];
  EXPECT_EQ(compressed.segmentation.kind, CocoSegmentation::kRle);
  EXPECT_EQ(compressed.segmentation.rle.counts, (std::vector<uint32_t>{0, 2, 6, 72}));
  // Missing area defaults to w*h.
  EXPECT_DOUBLE_EQ(compressed.area, 1.0);
}

TEST(CocoReader, WriteThenReadGivesSameDataset) {
  CocoDataset data = read_coco(temp_file("small.json", kSmallGt));
  std::string out = (reader_dir() / "written.json").string();
  write_coco(data, out);
  CocoDataset again = read_coco(out);
  ASSERT_EQ(again.annotations.size(), data.annotations.size());
  for (size_t i = 0; i < data.annotations.size(); ++i) {
    const auto &a = data.annotations[i], &b = again.annotations[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.image_id, b.image_id);
    EXPECT_EQ(a.iscrowd, b.iscrowd);
    for (int k = 0; k < 4; ++k) EXPECT_EQ(a.bbox[k], b.bbox[k]);
    EXPECT_EQ(a.area, b.area);
    EXPECT_EQ(a.segmentation.kind, b.segmentation.kind);
    EXPECT_EQ(a.segmentation.polygons, b.segmentation.polygons);
    EXPECT_EQ(a.segmentation.rle.counts, b.segmentation.rle.counts);
  }
  EXPECT_EQ(again.images[0].file_name, "a.jpg");
  EXPECT_EQ(again.categories[0].name, "cat");
}

TEST(CocoReader, ErrorsNameFileAndFieldPath) {
  std::string bad_box = temp_file("bad_box.json", R"({"images": [{"id": 1}], "categories": [{"id": 1}],
    "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]},
                    {"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3]}]})");
  expect_error([&] { read_coco(bad_box); }, {"bad_box.json", "annotations[1].bbox: expected 4 numbers"});
  std::string negative = temp_file("negative.json", R"({"images": [{"id": 1}], "categories": [{"id": 1}],
    "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 2, -3, 4]}]})");
  expect_error([&] { read_coco(negative); }, {"annotations[0].bbox: negative size"});
  std::string unknown = temp_file("unknown.json", R"({"images": [{"id": 1}], "categories": [{"id": 1}],
    "annotations": [{"id": 1, "image_id": 9, "category_id": 1, "bbox": [1, 2, 3, 4]}]})");
  expect_error([&] { read_coco(unknown); }, {"unknown.json", "annotations[0].image_id", "image 9"});
  std::string text_id = temp_file("text_id.json", R"({"images": [{"id": "x"}]})");
  expect_error([&] { read_coco(text_id); }, {"images[0].id: expected an integer, got a string"});
  std::string malformed = temp_file("malformed.json", "{\"images\": [\n  {\"id\": 1,}\n]}");
  expect_error([&] { read_coco(malformed); }, {"malformed.json:2:"});
  std::string counts = temp_file("counts.json", R"({"images": [{"id": 1}], "categories": [{"id": 1}],
    "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4],
                     "segmentation": {"size": [2, 2], "counts": [1, 2]}}]})");
  expect_error([&] { read_coco(counts); }, {"annotations[0].segmentation.counts: counts sum to 3"});
}

TEST(CocoReader, ResultsGetIdsAreasAndChecks) {
  CocoDataset gt = read_coco(temp_file("small.json", kSmallGt));
  std::string dt_path = temp_file("dt.json", R"([
    {"image_id": 7, "category_id": 5, "bbox": [1, 1, 2, 3], "score": 0.9},
    {"image_id": 3, "category_id": 2, "bbox": [0, 0, 1.5, 2], "score": 0.25}])");
  CocoDataset dt = read_coco_results(dt_path, gt);
  ASSERT_EQ(dt.annotations.size(), 2u);
  EXPECT_EQ(dt.annotations[0].id, 1);
  EXPECT_EQ(dt.annotations[1].id, 2);
  EXPECT_DOUBLE_EQ(dt.annotations[0].area, 6.0);
  EXPECT_DOUBLE_EQ(dt.annotations[1].area, 3.0);
  EXPECT_DOUBLE_EQ(dt.annotations[1].score, 0.25);
  EXPECT_EQ(dt.annotations_by_image[1].size(), 1u);

  // Segmentation-only results: area and box come from the mask (a 2x2 square at x=1..2, y=0..1).
  std::string segm_path = temp_file("segm.json", R"([
    {"image_id": 3, "category_id": 2, "segmentation": {"size": [4, 4], "counts": [4, 2, 2, 2, 6]},
     "score": 0.5}])");
  CocoDataset segm = read_coco_results(segm_path, gt);
  EXPECT_DOUBLE_EQ(segm.annotations[0].area, 4.0);
  EXPECT_DOUBLE_EQ(segm.annotations[0].bbox[0], 1.0);
  EXPECT_DOUBLE_EQ(segm.annotations[0].bbox[1], 0.0);
  EXPECT_DOUBLE_EQ(segm.annotations[0].bbox[2], 2.0);
  EXPECT_DOUBLE_EQ(segm.annotations[0].bbox[3], 2.0);

  std::string bad_image = temp_file("bad_image.json",
      R"([{"image_id": 7, "category_id": 5, "bbox": [1, 1, 2, 3], "score": 0.9},
          {"image_id": 12, "category_id": 5, "bbox": [1, 1, 2, 3], "score": 0.9}])");
  expect_error([&] { read_coco_results(bad_image, gt); },
               {"bad_image.json: [1].image_id: image 12 is not in the ground truth"});
  std::string bad_cat = temp_file("bad_cat.json",
      R"([{"image_id": 7, "category_id": 4, "bbox": [1, 1, 2, 3], "score": 0.9}])");
  expect_error([&] { read_coco_results(bad_cat, gt); }, {"[0].category_id: category 4"});
  std::string no_score = temp_file("no_score.json", R"([{"image_id": 7, "category_id": 5, "bbox": [1, 1, 2, 3]}])");
  expect_error([&] { read_coco_results(no_score, gt); }, {"[0].score: missing"});
  std::string empty = temp_file("empty.json", "[]");
  EXPECT_TRUE(read_coco_results(empty, gt).annotations.empty());
}

TEST(CocoReader, MissingCategoriesOrAnnotationsListsReadAsEmpty) {
  // Both lists are optional in pycocotools; an absent one used to be iterated as a null array.
  CocoDataset no_annotations = read_coco(temp_file(
      "no_annotations.json", R"({"images": [{"id": 1, "width": 4, "height": 4}], "categories": [{"id": 1}]})"));
  EXPECT_TRUE(no_annotations.annotations.empty());
  EXPECT_EQ(no_annotations.categories.size(), 1u);
  CocoDataset neither = read_coco(temp_file("neither.json", R"({"images": [{"id": 1}]})"));
  EXPECT_TRUE(neither.categories.empty());
  EXPECT_TRUE(neither.annotations.empty());
  const std::string path = temp_file("no_categories.json", R"({"images": [{"id": 1}],
    "annotations": [{"id": 1, "image_id": 1, "category_id": 3, "bbox": [0, 0, 1, 1]}]})");
  expect_error([&] { read_coco(path); },
               {path + ": annotations[0].category_id: category 3 is not in \"categories\""});
}

TEST(CocoReader, PolygonFarOutsideItsImageIsRefusedWithItsField) {
  const std::string gt = temp_file("huge_polygon.json", R"({"images": [{"id": 1, "width": 640, "height": 480}],
    "categories": [{"id": 1}], "annotations": [
      {"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "segmentation": [[0, 0, 10, 0, 10, 10]]},
      {"id": 2, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1],
       "segmentation": [[0, 0, -1e9, 0, 10, 10]]}]})");
  expect_error([&] { read_coco(gt); },
               {gt + ": annotations[1].segmentation: polygon coordinate -1e+09 is outside [-5120, 5120] (8x the "
                     "640x480 image's larger side)"});
  // Coordinates a little outside the image are normal (pycocotools clips them while rasterizing).
  CocoDataset ok = read_coco(temp_file("edge_polygon.json", R"({"images": [{"id": 1, "width": 640, "height": 480}],
    "categories": [{"id": 1}], "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1],
      "segmentation": [[-20, -20, 700, -20, 700, 500]]}]})"));
  EXPECT_EQ(ok.annotations.size(), 1u);

  // Results files are checked the same way, against the ground truth image.
  const std::string dt = temp_file("huge_polygon_dt.json",
                                   R"([{"image_id": 1, "category_id": 1, "score": 0.5, "segmentation": [[0, 0, 1, 0, 1, "nan"]]},
                                       {"image_id": 1, "category_id": 1, "score": 0.5, "segmentation": [[0, 0, 3e9, 0, 1, 1]]}])");
  expect_error([&] { read_coco_results(dt, ok); }, {dt + ": [0].segmentation: polygon coordinates must be numbers"});
  const std::string dt2 = temp_file("huge_polygon_dt2.json",
                                    R"([{"image_id": 1, "category_id": 1, "score": 0.5, "segmentation": [[0, 0, 3e9, 0, 1, 1]]}])");
  expect_error([&] { read_coco_results(dt2, ok); }, {dt2 + ": [0].segmentation: polygon coordinate 3e+09 is outside"});
}

TEST(CocoReader, PolygonWithVeryLongEdgesIsRefused) {
  // Every coordinate in range, but 4000 edges crossing a 4000-px image: 16M pixels of edge walk.
  std::vector<double> xy;
  for (int i = 0; i < 4000; ++i) {
    xy.push_back(i % 2 ? 4000 : 0);
    xy.push_back(i);
  }
  EXPECT_NE(polygon_problem(xy.data(), xy.size() / 2, 4000, 4000).find("polygon edges are "), std::string::npos);
  EXPECT_EQ(polygon_problem(xy.data(), 100, 4000, 4000), "");
  expect_error([&] { rle_from_polygon(xy.data(), xy.size() / 2, 4000, 4000); }, {"polygon edges are "});
}
