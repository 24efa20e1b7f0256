// Implements: train_input.augment through the real `detseg` binary: `detseg augment` draws its grid,
// a bad step fails with file:line, `info --resolved` shows the list an older config resolves to,
// and `detseg train` writes train_batch.png at its start.
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>

#include <filesystem>
#include <fstream>

#include "../command_runner.h"
#include "../temp_dir.h"

namespace fs = std::filesystem;

namespace {

std::string demo_config(const fs::path& dir, const std::string& input_extra, const std::string& extra = "") {
  const std::string demo = std::string(DETSEG_SOURCE_DIR) + "/assets/demo";
  const fs::path path = dir / "augment.yaml";
  std::ofstream(path) << "model: {type: retinanet, num_classes: 3, backbone: resnet18, image_size: 128, fpn_channels: 32}\n"
                         "train: {batch_size: 2, num_steps: 1, log_every: 1, checkpoint_every: 1}\n"
                         "train_input:\n"
                         "  annotations: " << demo << "/train.json\n"
                         "  images: " << demo << "/images\n"
                      << input_extra << extra;
  return path.string();
}

detseg::testing::CommandRun detseg_run(const std::string& args) {
  return detseg::testing::run_command(std::string(DETSEG_BINARY) + " --threads 1 " + args);
}

}  // namespace

TEST(AugmentCli, AugmentWritesAGridOfTheAugmentedImages) {
  const detseg::testing::TempDir dir("augment_cli");
  const std::string config = demo_config(dir.path(),
                                         "  augment:\n"
                                         "    - mosaic: {probability: 0.5}\n"
                                         "    - random_crop_image: {min_object_covered: 0.5}\n"
                                         "    - random_horizontal_flip\n"
                                         "    - random_adjust_hue: {max_delta: 0.1}\n");
  const detseg::testing::CommandRun r =
      detseg_run("augment --config " + config + " --out " + (dir.path() / "out").string() + " --count 5");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("augment.png: 5 training images as augmented at step 0 (mosaic, random_crop_image, "
                          "random_horizontal_flip, random_adjust_hue, resize_to_fit)"),
            std::string::npos)
      << r.output;
  // 5 cells: 3 columns, 2 rows of 320 px cells (+ an 18 px title) with 4 px gaps.
  const cv::Mat grid = cv::imread((dir.path() / "out" / "augment.png").string());
  EXPECT_EQ(grid.cols, 3 * (320 + 4) + 4);
  EXPECT_EQ(grid.rows, 2 * (338 + 4) + 4);
  // The same command draws the same images; another step, other ones.
  const std::string again = (dir.path() / "again").string();
  ASSERT_EQ(detseg_run("augment --config " + config + " --out " + again + " --count 5").code, 0);
  const cv::Mat same = cv::imread(again + "/augment.png");
  EXPECT_EQ(cv::norm(grid, same, cv::NORM_INF), 0);
  ASSERT_EQ(detseg_run("augment --config " + config + " --out " + again + " --count 5 --step 7").code, 0);
  EXPECT_GT(cv::norm(grid, cv::imread(again + "/augment.png"), cv::NORM_INF), 0);
}

TEST(AugmentCli, BadStepsFailWithFileLineAndOlderKeysResolveToTheList) {
  const detseg::testing::TempDir dir("augment_cli_bad");
  const std::string bad = demo_config(dir.path(), "  augment:\n    - random_crop_image: {overlap: 0.5}\n");
  const detseg::testing::CommandRun r = detseg_run("augment --config " + bad + " --out " + dir.str());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(bad + ":7: train_input.augment[0].random_crop_image.overlap: unknown parameter of "
                                "random_crop_image"),
            std::string::npos)
      << r.output;
  const std::string older = demo_config(dir.path(), "  hflip: true\n  scale_min: 0.5\n  scale_max: 1.5\n");
  const detseg::testing::CommandRun info = detseg_run("info --config " + older + " --resolved");
  ASSERT_EQ(info.code, 0) << info.output;
  EXPECT_NE(info.output.find("  hflip: false\n  scale_min: 1\n  scale_max: 1\n  augment:\n"
                             "    - random_horizontal_flip: {probability: 0.5}\n"
                             "    - scale_jitter_crop: {probability: 1, output_size: 0, scale_min: 0.5, scale_max: 1.5}\n"),
            std::string::npos)
      << info.output;
}

TEST(AugmentCli, TrainDrawsWhatTheModelSeesAtItsStart) {
  const detseg::testing::TempDir dir("augment_cli_train");
  const std::string config = demo_config(dir.path(), "  hflip: true\n");
  const fs::path model_dir = dir.path() / "model";
  const detseg::testing::CommandRun r =
      detseg_run("train --config " + config + " --model-dir " + model_dir.string() + " --set \"eval_input.annotations=''\"");
  ASSERT_EQ(r.code, 0) << r.output;
  const cv::Mat picture = cv::imread((model_dir / "train_batch.png").string());
  ASSERT_FALSE(picture.empty()) << r.output;
  EXPECT_EQ(picture.cols, 4 * (320 + 4) + 4);  // 16 images: 4 x 4
  EXPECT_NE(r.output.find("train_batch.png: 16 training images as augmented from step 0"), std::string::npos)
      << r.output;
}
