// Tests: the segmentation side of the engine. engine/inputs turns a seg_folder input into data
// (void values -> ignore, class names from the label map) and DeepLab's loader (random scale by
// steps, crop padded with the mean colour and the ignore label; full resolution at evaluation);
// and the `detseg` command trains, evaluates (--json) and predicts (label-map PNGs) a DeepLab
// model on two real CamVid images, with errors for a detection format.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/engine/inputs.h"
#include "detseg/viz/label_map.h"
#include "command_runner.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace fs = std::filesystem;

namespace {

const std::string kCamVid = std::string(DETSEG_SHARED_DIR) + "/data/camvid/CamVid";

std::string seg_yaml(const std::string& extra_input = "") {
  const std::string input = "{format: seg_folder, images: '" + kCamVid + "/val', annotations: '" + kCamVid +
                            "/valannot', void_values: [11], max_images: 2, num_workers: 0" + extra_input + "}";
  return "model: {type: deeplabv3plus, num_classes: 11, backbone: resnet18, frozen_batch_norm: false,\n"
         "        deeplab: {aspp_channels: 16, decoder_channels: 16, low_level_channels: 8, crop_size: 96}}\n"
         "train: {batch_size: 2, num_steps: 1, checkpoint_every: 1, optimizer: {type: adam}}\n"
         "train_input: " + input + "\neval_input: " + input + "\n";
}

TEST(SegEngine, InputsGiveDeepLabCropsForTrainingAndFullResolutionForEval) {
  const detseg::testing::TempDir labels_temp("seg_labels");
  const std::string labels = (labels_temp / "seg_labels.txt").string();
  detseg::write_file_atomic(labels, "Sky\nBuilding\nPole\nRoad\nPavement\nTree\nSignSymbol\nFence\nCar\nPedestrian\nBicyclist\n");
  const detseg::PipelineConfig config =
      detseg::parse_config(seg_yaml(", label_map: '" + labels + "', scale_min: 0.5, scale_max: 2.0"), "seg.yaml");
  const detseg::InputData data = detseg::make_input_data(config, config.train_input, true);
  EXPECT_EQ(data.size, 2);  // max_images
  EXPECT_EQ(data.class_names.size(), 11u);
  EXPECT_EQ(data.class_names[2], "Pole");
  EXPECT_TRUE(data.category_ids.empty());
  ASSERT_TRUE(data.segmentation != nullptr);

  detseg::LoaderOptions train = detseg::make_loader_options(config, config.train_input, true, 2, 96);
  EXPECT_EQ(train.augment.resize, detseg::AugmentOptions::Resize::kDeepLab);
  EXPECT_EQ(train.augment.deeplab.scale_step, 0.25);
  EXPECT_EQ(train.augment.deeplab.min_scale, 0.5);
  EXPECT_EQ(train.augment.deeplab.ignore_label, 255);
  // The mean colour, 0 after normalisation.
  EXPECT_EQ(train.augment.deeplab.image_fill, (std::array<uint8_t, 3>{124, 116, 104}));
  train.epochs = 1;
  detseg::Loader loader(data.size, data.load, train);
  detseg::Batch batch;
  ASSERT_TRUE(loader.next(batch));
  EXPECT_EQ(batch.images.sizes(), (std::vector<int64_t>{2, 3, 96, 96}));
  ASSERT_TRUE(batch.label_maps.defined());
  // Labels are classes 0..10 or 255 (void 11 mapped to it); nothing else.
  const at::Tensor l = batch.label_maps;
  EXPECT_TRUE((((l >= 0) & (l <= 10)) | (l == 255)).all().item<bool>());

  const detseg::LoaderOptions eval = detseg::make_loader_options(config, config.eval_input, false, 1, 96);
  EXPECT_EQ(eval.augment.resize, detseg::AugmentOptions::Resize::kNone);
  detseg::Loader eval_loader(data.size, data.load, eval);
  ASSERT_TRUE(eval_loader.next(batch));
  EXPECT_EQ(batch.images.sizes(), (std::vector<int64_t>{1, 3, 360, 480}));
  EXPECT_EQ(batch.label_maps.eq(11).sum().item<int64_t>(), 0);
  EXPECT_GT(batch.label_maps.eq(255).sum().item<int64_t>(), 0);  // this frame has void pixels

  // A detection format is refused for a segmentation model, naming the field.
  const detseg::PipelineConfig coco = detseg::parse_config(
      seg_yaml() + "", "seg.yaml", {"train_input.format=coco"});
  try {
    detseg::make_input_data(coco, coco.train_input, true);
    ADD_FAILURE() << "no error";
  } catch (const detseg::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("input.format"), std::string::npos) << e.what();
  }
}

TEST(SegEngine, PascalColourMapAndOverlay) {
  // DeepLab's create_pascal_label_colormap: VOC's background, aeroplane, bicycle, ..., person.
  EXPECT_EQ(detseg::pascal_label_color(0), (std::array<uint8_t, 3>{0, 0, 0}));
  EXPECT_EQ(detseg::pascal_label_color(1), (std::array<uint8_t, 3>{128, 0, 0}));
  EXPECT_EQ(detseg::pascal_label_color(2), (std::array<uint8_t, 3>{0, 128, 0}));
  EXPECT_EQ(detseg::pascal_label_color(8), (std::array<uint8_t, 3>{64, 0, 0}));
  EXPECT_EQ(detseg::pascal_label_color(15), (std::array<uint8_t, 3>{192, 128, 128}));
  const cv::Mat colour = detseg::colorize_label_map(at::tensor({1, 255, 2, 15}, at::kLong).reshape({2, 2}));
  EXPECT_EQ(colour.at<cv::Vec3b>(0, 0), cv::Vec3b(0, 0, 128));  // BGR
  EXPECT_EQ(colour.at<cv::Vec3b>(0, 1), cv::Vec3b(0, 0, 0));    // ignore: black
  EXPECT_EQ(colour.at<cv::Vec3b>(1, 1), cv::Vec3b(128, 128, 192));
  const cv::Mat grey(2, 2, CV_8UC3, cv::Scalar(100, 100, 100));
  EXPECT_EQ(detseg::overlay_label_map(grey, colour, 0.5).at<cv::Vec3b>(0, 0), cv::Vec3b(50, 50, 114));
}

int run(const std::string& args, std::string* output = nullptr) {
  const auto r = detseg::testing::run_command("OMP_WAIT_POLICY=passive " + std::string(DETSEG_BINARY) + " --threads 2 " + args);
  if (output) *output = r.output;
  return r.code;
}

TEST(SegEngine, CommandTrainsEvaluatesAndPredicts) {
  const detseg::testing::TempDir dir_temp("seg_cli");
  const fs::path dir = dir_temp.path();
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  const std::string config = (dir / "seg.yaml").string();
  detseg::write_file_atomic(config, seg_yaml());
  std::string out;
  ASSERT_EQ(run("train --config " + config + " --model-dir " + (dir / "model").string(), &out), 0) << out;
  EXPECT_NE(out.find("mIoU"), std::string::npos) << out;  // train ends with the evaluation
  ASSERT_EQ(run("eval --config " + config + " --model-dir " + (dir / "model").string() + " --json " +
                    (dir / "eval.json").string() + " --set model.deeplab.eval_flip=true",
                &out),
            0)
      << out;
  const nlohmann::json j = nlohmann::json::parse(detseg::read_file((dir / "eval.json").string()));
  EXPECT_EQ(j["step"], 1);
  EXPECT_EQ(j["num_images"], 2);
  EXPECT_TRUE(j["mIoU"].is_number());
  EXPECT_EQ(j["per_class_iou"].size(), 11u);
  fs::copy_file(kCamVid + "/val/0016E5_07959.png", dir / "in" / "a.png");
  ASSERT_EQ(run("predict --config " + config + " --checkpoint " + (dir / "model" / "ckpt-1.dsckpt").string() +
                    " --input " + (dir / "in").string() + " --output " + (dir / "pred").string(),
                &out),
            0)
      << out;
  // Named after the input's whole file name (a.png -> a.png.png): a.jpg beside it would not collide.
  for (const char* name : {"a.png.png", "a.png_overlay.png", "a.png_labels.png", "segmentation.json", "images.json"})
    EXPECT_TRUE(fs::exists(dir / "pred" / name)) << name;
  const cv::Mat colour = cv::imread((dir / "pred" / "a.png.png").string(), cv::IMREAD_COLOR);
  EXPECT_EQ(colour.cols, 480);
  EXPECT_EQ(colour.rows, 360);
  const cv::Mat ids = cv::imread((dir / "pred" / "a.png_labels.png").string(), cv::IMREAD_UNCHANGED);
  EXPECT_EQ(ids.channels(), 1);
  double max_id = 0;
  cv::minMaxLoc(ids, nullptr, &max_id);
  EXPECT_LT(max_id, 11);
  // --no-draw: the class ids and the JSON, no colour map or overlay.
  ASSERT_EQ(run("predict --config " + config + " --checkpoint " + (dir / "model" / "ckpt-1.dsckpt").string() +
                    " --input " + (dir / "in").string() + " --output " + (dir / "ids").string() + " --no-draw",
                &out),
            0)
      << out;
  for (const char* name : {"a.png_labels.png", "segmentation.json", "images.json"})
    EXPECT_TRUE(fs::exists(dir / "ids" / name)) << name;
  for (const char* name : {"a.png.png", "a.png_overlay.png"}) EXPECT_FALSE(fs::exists(dir / "ids" / name)) << name;
  EXPECT_EQ(detseg::read_file((dir / "ids" / "segmentation.json").string()),
            detseg::read_file((dir / "pred" / "segmentation.json").string()));
  fs::remove_all(dir);
}

}  // namespace
