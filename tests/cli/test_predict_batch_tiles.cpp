// `detseg predict --batch` and `--tile`, through the real binary: batches (decoded on threads of
// their own, written on another) give the one-image detections in the same order; tiles are
// reachable from the flag and from the config key alike and keep boxes inside the image; wrong
// values are one line each.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "command_runner.h"
#include "temp_dir.h"
#include "tiny_model.h"
#include "test_paths.h"

namespace fs = std::filesystem;

namespace {

using detseg::testing::CommandRun;

const std::string kDemo = std::string(DETSEG_SOURCE_DIR) + "/assets/demo";

CommandRun run(const std::string& args) {
  return detseg::testing::run_command(std::string(DETSEG_BINARY) + " --threads 2 " + args);
}

// A 1-step RetinaNet-R18 (tiny_model.h) keeping 30 detections per image.
const detseg::testing::TinyModel& tiny_model() { return detseg::testing::tiny_model(30); }

std::string predict_args(const fs::path& input, const fs::path& output) {
  return "predict --config " + tiny_model().config + " --checkpoint " + tiny_model().checkpoint + " --input " +
         input.string() + " --output " + output.string();
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Five demo images (all 640 x 480) in a folder of their own.
fs::path five_images(const fs::path& dir) {
  fs::create_directories(dir);
  for (int i : {0, 1, 2, 3, 4}) {
    const std::string name = "BloodImage_0000" + std::to_string(i) + ".jpg";
    fs::copy_file(kDemo + "/images/" + name, dir / name);
  }
  return dir;
}

void expect_same_detections(const nlohmann::json& a, const nlohmann::json& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k]["file_name"], b[k]["file_name"]) << k;
    EXPECT_EQ(a[k]["category_id"], b[k]["category_id"]) << k;
    EXPECT_NEAR(a[k]["score"].get<double>(), b[k]["score"].get<double>(), 1e-4) << k;
    for (int c = 0; c < 4; ++c) EXPECT_NEAR(a[k]["bbox"][c].get<double>(), b[k]["bbox"][c].get<double>(), 1e-2) << k;
  }
}

}  // namespace

// Images of one size in batches of 3 (5 = 3 + 2): the same detections, in the same order, as one
// at a time, and the same image table.
TEST(PredictBatch, BatchesGiveTheOneImageDetectionsInOrder) {
  const detseg::testing::TempDir temp("predict_batch");
  const fs::path images = five_images(temp / "images");
  const CommandRun one = run(predict_args(images, temp / "one"));
  ASSERT_EQ(one.code, 0) << one.output;
  const CommandRun three = run(predict_args(images, temp / "three") + " --batch 3");
  ASSERT_EQ(three.code, 0) << three.output;
  EXPECT_NE(three.output.find("predicted 5 images into"), std::string::npos) << three.output;
  const nlohmann::json a = read_json(temp / "one" / "detections.json"), b = read_json(temp / "three" / "detections.json");
  EXPECT_EQ(a.size(), 5u * 30u);
  expect_same_detections(a, b);
  EXPECT_EQ(read_json(temp / "one" / "images.json"), read_json(temp / "three" / "images.json"));
  for (int i : {0, 1, 2, 3, 4})
    EXPECT_TRUE(fs::exists(temp / "three" / ("BloodImage_0000" + std::to_string(i) + ".jpg.png"))) << i;
}

// --tile cuts a 640 x 480 image into 128-pixel tiles: detections come back in the image's pixels,
// differ from the whole image's, and --set postprocess.tile_size gives the same as the flag.
// --no-draw: the same detections.json and images.json, and no picture in the output folder.
TEST(PredictBatch, NoDrawWritesTheJsonOnly) {
  const detseg::testing::TempDir temp("predict_no_draw");
  const fs::path images = five_images(temp / "images");
  const CommandRun drawn = run(predict_args(images, temp / "drawn") + " --batch 2");
  ASSERT_EQ(drawn.code, 0) << drawn.output;
  const CommandRun plain = run(predict_args(images, temp / "plain") + " --batch 2 --no-draw");
  ASSERT_EQ(plain.code, 0) << plain.output;
  EXPECT_NE(plain.output.find("predicted 5 images into"), std::string::npos) << plain.output;
  expect_same_detections(read_json(temp / "drawn" / "detections.json"), read_json(temp / "plain" / "detections.json"));
  EXPECT_EQ(read_json(temp / "drawn" / "images.json"), read_json(temp / "plain" / "images.json"));
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(temp / "plain")) files.push_back(entry.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"detections.json", "images.json"}));
  EXPECT_TRUE(fs::exists(temp / "drawn" / "BloodImage_00000.jpg.png"));
}

TEST(PredictTiles, TheFlagAndTheConfigKeyTileTheImage) {
  const detseg::testing::TempDir temp("predict_tiles");
  const fs::path image = fs::path(kDemo) / "images" / "BloodImage_00000.jpg";
  const CommandRun whole = run(predict_args(image, temp / "whole"));
  ASSERT_EQ(whole.code, 0) << whole.output;
  const CommandRun tiled = run(predict_args(image, temp / "tiled") + " --tile 128 --tile-overlap 0.25 --batch 4");
  ASSERT_EQ(tiled.code, 0) << tiled.output;
  const CommandRun keyed =
      run(predict_args(image, temp / "keyed") + " --set postprocess.tile_size=128 --set postprocess.tile_overlap=0.25 --batch 4");
  ASSERT_EQ(keyed.code, 0) << keyed.output;
  const nlohmann::json w = read_json(temp / "whole" / "detections.json"), t = read_json(temp / "tiled" / "detections.json");
  ASSERT_FALSE(t.empty());
  // 20 tiles and the whole image, up to 30 detections each, merged: more than the whole image's 30.
  EXPECT_GT(t.size(), w.size());
  for (const auto& d : t) {
    EXPECT_GE(d["bbox"][0].get<double>(), -1e-3);
    EXPECT_GE(d["bbox"][1].get<double>(), -1e-3);
    EXPECT_LE(d["bbox"][0].get<double>() + d["bbox"][2].get<double>(), 640 + 1e-3);
    EXPECT_LE(d["bbox"][1].get<double>() + d["bbox"][3].get<double>(), 480 + 1e-3);
  }
  expect_same_detections(t, read_json(temp / "keyed" / "detections.json"));
}

TEST(PredictTiles, WrongValuesAreOneLine) {
  const detseg::testing::TempDir temp("predict_tiles_refusals");
  const fs::path image = fs::path(kDemo) / "images" / "BloodImage_00000.jpg";
  CommandRun r = run(predict_args(image, temp / "out") + " --tile 16");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("detseg: error: predict: --tile 16: a tile is at least 32 pixels"), std::string::npos)
      << r.output;
  r = run(predict_args(image, temp / "out") + " --tile-overlap 0.95");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--tile-overlap"), std::string::npos) << r.output;
  r = run(predict_args(image, temp / "out") + " --batch 0");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--batch"), std::string::npos) << r.output;
}
