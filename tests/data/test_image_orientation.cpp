// Implements: tests that every reader of images agrees on the EXIF orientation and on damaged
// images: data set examples (COCO, YOLO, segmentation folders) hold the upright pixels their
// annotations describe, a size that only fits the image as stored is one clear line, bad_images
// skip/stop, and `detseg predict` (detections and drawings) sees what training sees.
#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <torch/nn/module.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "data_test_util.h"
#include "detseg/api/predict.h"
#include "detseg/config/config.h"
#include "detseg/core/files.h"
#include "detseg/data/dataset.h"
#include "detseg/data/image_io.h"
#include "detseg/data/readers/seg_folder.h"
#include "detseg/data/readers/yolo.h"
#include "detseg/models/build.h"
#include "detseg/models/model.h"
#include "detseg/train/checkpoint.h"
#include "image_test_files.h"

using namespace detseg;
using detseg::datatest::error_of;
namespace fs = std::filesystem;

namespace {

// A 40x24 picture (bright block at its stored top left, x < 10 and y < 8) stored as a JPEG that
// says "turn me a quarter clockwise" (orientation 6): upright it is 24 wide and 40 high, the block
// at x 16..24, y 0..10.
std::string turned_jpeg() {
  return datatest::jpeg_with_exif(datatest::jpeg_bytes(datatest::test_pattern(40, 24)), 6);
}

cv::Mat upright_pixels() {
  const cv::Mat plain = decode_image_file(datatest::jpeg_bytes(datatest::test_pattern(40, 24)), "plain.jpg").bgr;
  cv::Mat turned;
  cv::rotate(plain, turned, cv::ROTATE_90_CLOCKWISE);
  return turned;
}

CocoDataset one_image(const std::string& file, int64_t width, int64_t height, std::vector<double> xywh) {
  CocoDataset d;
  d.source = "turned.json";
  d.images.push_back({7, file, width, height});
  d.categories.push_back({1, "block", ""});
  CocoAnnotation a;
  a.id = 1;
  a.image_id = 7;
  a.category_id = 1;
  for (int k = 0; k < 4; ++k) a.bbox[k] = xywh[static_cast<size_t>(k)];
  d.annotations.push_back(a);
  return d;
}

}  // namespace

TEST(ImageOrientation, DatasetExamplesAreUprightAndTheirBoxesOnTheObject) {
  const std::string dir = datatest::temp_dir("orient_dataset");
  write_file_atomic(dir + "/turned.jpg", turned_jpeg());
  DetectionDatasetOptions o;
  o.image_dir = dir;
  DetectionDataset ds(one_image("turned.jpg", 24, 40, {16, 0, 8, 10}), o);
  const Example ex = ds.get(0);
  ASSERT_EQ(ex.image.sizes(), (at::IntArrayRef{3, 40, 24}));
  EXPECT_TRUE(ex.image.equal(rgb_tensor_from_bgr(upright_pixels())));
  // The annotated box covers the bright block; the rest of the image is darker.
  const at::Tensor inside = ex.image.slice(1, 0, 8).slice(2, 17, 24).to(at::kFloat);
  EXPECT_GT(inside.min().item<float>(), 235.f);
  EXPECT_LT(ex.image.slice(1, 20, 40).to(at::kFloat).mean().item<float>(), 200.f);
  int orientation = 0;
  read_image(dir + "/turned.jpg", &orientation);
  EXPECT_EQ(orientation, 6);
}

TEST(ImageOrientation, AnAnnotationOfTheStoredRasterIsOneClearError) {
  const std::string dir = datatest::temp_dir("orient_mismatch");
  write_file_atomic(dir + "/turned.jpg", turned_jpeg());
  DetectionDatasetOptions o;
  o.image_dir = dir;
  DetectionDataset ds(one_image("turned.jpg", 40, 24, {0, 0, 10, 8}), o);
  EXPECT_EQ(error_of([&] { ds.get(0); }),
            dir + "/turned.jpg: EXIF orientation 6 makes it 24x40 but the annotation says 40x24: turned.json was made on "
                  "the image as stored, and detseg turns images upright first, as PIL's exif_transpose does (annotate "
                  "the upright image, or remove the file's orientation tag)");
  DetectionDataset other(one_image("turned.jpg", 30, 30, {0, 0, 10, 8}), o);
  EXPECT_EQ(error_of([&] { other.get(0); }),
            dir + "/turned.jpg: EXIF orientation 6 makes it 24x40 but the annotations (turned.json) say 30x30");
}

// Ultralytics labels the upright image (exif_size): the reader sizes a turned image upright.
TEST(ImageOrientation, YoloLabelsAreFractionsOfTheUprightImage) {
  const std::string dir = datatest::temp_dir("orient_yolo");
  fs::create_directories(dir + "/images/val");
  fs::create_directories(dir + "/labels/val");
  write_file_atomic(dir + "/images/val/turned.jpg", turned_jpeg());
  write_file_atomic(dir + "/labels/val/turned.txt", "0 0.8333333 0.125 0.3333333 0.25\n");
  write_file_atomic(dir + "/data.yaml", "path: .\ntrain: images/val\nval: images/val\nnames: [block]\n");
  YoloOptions yolo;
  yolo.split = "val";
  const YoloDataset d = read_yolo(dir + "/data.yaml", yolo);
  ASSERT_EQ(d.coco.images.size(), 1u);
  EXPECT_EQ(d.coco.images[0].width, 24);
  EXPECT_EQ(d.coco.images[0].height, 40);
  ASSERT_EQ(d.coco.annotations.size(), 1u);
  EXPECT_NEAR(d.coco.annotations[0].bbox[0], 16.0, 1e-4);
  EXPECT_NEAR(d.coco.annotations[0].bbox[3], 10.0, 1e-4);
  DetectionDatasetOptions o;
  o.image_dir = d.image_root;
  EXPECT_EQ(DetectionDataset(d.coco, o).get(0).image.size(2), 24);  // no size mismatch
}

TEST(ImageOrientation, SegmentationLabelsMustFitTheUprightImage) {
  const std::string dir = datatest::temp_dir("orient_seg");
  fs::create_directories(dir + "/images");
  fs::create_directories(dir + "/labels");
  write_file_atomic(dir + "/images/a.jpg", turned_jpeg());
  write_file_atomic(dir + "/labels/a.png", datatest::encoded(".png", cv::Mat::zeros(40, 24, CV_8UC1)));
  SegFolderOptions o;
  o.image_dir = dir + "/images";
  o.label_dir = dir + "/labels";
  o.num_classes = 2;
  EXPECT_EQ(SegmentationDataset(read_seg_folder(o)).get(0).label_map.size(1), 24);
  write_file_atomic(dir + "/labels/a.png", datatest::encoded(".png", cv::Mat::zeros(24, 40, CV_8UC1)));
  EXPECT_EQ(error_of([&] { SegmentationDataset(read_seg_folder(o)).get(0); }),
            dir + "/labels/a.png: label map is 40x24 but its image " + dir + "/images/a.jpg is 24x40 (after its EXIF "
                  "orientation 6)");
}

// bad_images: stop names the file; skip leaves it out (an Example without an image) and lists it.
TEST(ImageOrientation, BadImagesStopOrAreLeftOut) {
  const std::string dir = datatest::temp_dir("bad_images");
  const std::string good = datatest::jpeg_bytes(datatest::test_pattern(40, 24));
  write_file_atomic(dir + "/good.jpg", good);
  write_file_atomic(dir + "/cut.jpg", good.substr(0, good.size() / 2));
  CocoDataset coco = one_image("good.jpg", 40, 24, {0, 0, 10, 8});
  for (const std::string name : {"cut.jpg", "missing.jpg"}) {
    coco.images.push_back({static_cast<int64_t>(coco.images.size()) + 7, name, 40, 24});
    CocoAnnotation a = coco.annotations[0];
    a.id = a.image_id = coco.images.back().id;
    coco.annotations.push_back(a);
  }
  DetectionDatasetOptions o;
  o.image_dir = dir;
  DetectionDataset stop(coco, o);
  EXPECT_EQ(error_of([&] { stop.get(1); }).find(dir + "/cut.jpg: cannot decode image (truncated JPEG"), 0u);
  o.bad_images = BadImagePolicy::kSkip;
  DetectionDataset skip(coco, o);
  EXPECT_TRUE(skip.get(0).image.defined());
  EXPECT_FALSE(skip.get(1).image.defined());
  EXPECT_FALSE(skip.get(2).image.defined());
  EXPECT_FALSE(skip.get(1).image.defined());  // listed once
  EXPECT_EQ(skip.skipped_images(), (std::vector<std::string>{dir + "/cut.jpg", dir + "/missing.jpg"}));
}

// predict decodes each image once, upright, and draws on those pixels: a turned JPEG gives the
// detections and the drawing of the same pixels stored upright (a PNG), boxes inside the upright
// image. (The model is freshly initialised: its boxes are arbitrary but deterministic.)
TEST(ImageOrientation, PredictDetectsAndDrawsOnTheUprightImage) {
  const std::string dir = datatest::temp_dir("orient_predict");
  const PipelineConfig config = parse_config(
      "model: {type: retinanet, num_classes: 2, backbone: resnet18, image_size: 128, fpn_channels: 32}\n"
      "postprocess: {score_threshold: 0.001}\n",
      dir + "/model.yaml");
  {
    torch::manual_seed(3);
    auto model = build_detector(config);
    write_checkpoint(dir + "/model.dsckpt", capture_training_state(0, *model, nullptr, nullptr));
  }
  const cv::Mat plain = decode_image_file(datatest::jpeg_bytes(datatest::test_pattern(160, 96)), "p.jpg").bgr;
  cv::Mat upright;
  cv::rotate(plain, upright, cv::ROTATE_90_CLOCKWISE);
  fs::create_directories(dir + "/turned");
  fs::create_directories(dir + "/stored_upright");
  write_file_atomic(dir + "/turned/x.jpg", datatest::jpeg_with_exif(datatest::jpeg_bytes(datatest::test_pattern(160, 96)), 6));
  write_file_atomic(dir + "/stored_upright/x.png", datatest::encoded(".png", upright));
  auto predict = [&](const std::string& in, const std::string& out) {
    PredictOptions p;
    p.checkpoint = dir + "/model.dsckpt";
    p.input = dir + "/" + in;
    p.output = dir + "/" + out;
    p.score_threshold = 0.0;  // draw every detection
    EXPECT_EQ(predict_images(config, p), 1);
    return nlohmann::json::parse(read_file(dir + "/" + out + "/detections.json"));
  };
  const nlohmann::json turned = predict("turned", "out_turned"), stored = predict("stored_upright", "out_stored");
  ASSERT_GT(turned.size(), 0u);
  ASSERT_EQ(turned.size(), stored.size());
  for (size_t i = 0; i < turned.size(); ++i) {
    EXPECT_EQ(turned[i]["bbox"], stored[i]["bbox"]) << i;
    EXPECT_EQ(turned[i]["score"], stored[i]["score"]) << i;
    const auto& b = turned[i]["bbox"];
    EXPECT_LE(b[0].get<double>() + b[2].get<double>(), 96.0 + 1e-3);
    EXPECT_LE(b[1].get<double>() + b[3].get<double>(), 160.0 + 1e-3);
  }
  const cv::Mat drawn_turned = read_image_bgr(dir + "/out_turned/x.jpg.png");
  const cv::Mat drawn_stored = read_image_bgr(dir + "/out_stored/x.png.png");
  ASSERT_EQ(drawn_turned.cols, 96);
  ASSERT_EQ(drawn_turned.rows, 160);
  EXPECT_EQ(cv::norm(drawn_turned, drawn_stored, cv::NORM_INF), 0);
  EXPECT_GT(cv::norm(drawn_turned, upright, cv::NORM_INF), 0);  // boxes were drawn
}
