// Implements: train_input.augment through the real `detseg` binary: `detseg augment` draws its grid,
// a bad step fails with file:line, `info --resolved` shows the list an older config resolves to,
// and `detseg train` writes train_batch.png at its start.
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "../command_runner.h"
#include "../temp_dir.h"
#include "test_paths.h"

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

namespace {

// The losses metrics.jsonl recorded, by step.
std::map<int64_t, double> losses(const fs::path& model_dir) {
  std::map<int64_t, double> out;
  std::ifstream in(model_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const size_t step = line.find("\"step\":"), loss = line.find("\"total_loss\":");
    if (step == std::string::npos || loss == std::string::npos) continue;
    out[std::stoll(line.substr(step + 7))] = std::stod(line.substr(loss + 13));
  }
  return out;
}

}  // namespace

// A list with image-mixing, cropping and colour steps: 4 steps straight and 2, stop, resume to 4
// see the same batches (the losses of steps 3 and 4 are the same numbers), with 1 and 2 workers.
TEST(AugmentCli, ResumeTrainsOnTheSameAugmentedBatches) {
  const detseg::testing::TempDir dir("augment_cli_resume");
  const std::string config = demo_config(dir.path(),
                                         "  augment:\n"
                                         "    - mosaic: {probability: 0.5}\n"
                                         "    - mixup: {probability: 0.3}\n"
                                         "    - random_horizontal_flip\n"
                                         "    - ssd_random_crop\n"
                                         "    - random_distort_color\n"
                                         "    - random_jitter_boxes\n"
                                         "    - random_scale_crop_and_pad_to_square: {output_size: 0, scale_min: 0.5}\n");
  const std::string common = " --set \"eval_input.annotations=''\" --set train.checkpoint_every=2";
  const fs::path straight = dir.path() / "straight", split = dir.path() / "split";
  ASSERT_EQ(detseg_run("train --config " + config + " --model-dir " + straight.string() + common +
                       " --set train.num_steps=4 --set train_input.num_workers=1")
                .code,
            0);
  ASSERT_EQ(detseg_run("train --config " + config + " --model-dir " + split.string() + common +
                       " --set train.num_steps=2 --set train_input.num_workers=2")
                .code,
            0);
  const detseg::testing::CommandRun resumed = detseg_run("train --config " + config + " --model-dir " +
                                                         split.string() + common + " --set train.num_steps=4");
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  const std::map<int64_t, double> a = losses(straight), b = losses(split);
  ASSERT_EQ(a.size(), 4u);
  for (int64_t step = 1; step <= 4; ++step) {
    ASSERT_EQ(b.count(step), 1u) << "step " << step;
    EXPECT_EQ(a.at(step), b.at(step)) << "step " << step;
  }
  EXPECT_NE(a.at(3), a.at(4));
}
