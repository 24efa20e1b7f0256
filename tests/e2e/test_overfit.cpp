// The reference's own wish: a detector trained on a couple of real images drives its loss towards
// zero and finds every object again (AP50 = 1 on those images). Runs the real engine end to end:
// config -> dataset -> loader -> RetinaNet -> train loop -> checkpoint -> evaluation.
#include <gtest/gtest.h>

#include <filesystem>

#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/data/readers/coco.h"
#include "detseg/engine/evaluate.h"
#include "detseg/engine/train_loop.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace {

// A COCO file holding the first `n` images of the bundled demo training set.
std::string write_subset(const std::string& dir, int n) {
  detseg::CocoDataset all = detseg::read_coco(std::string(DETSEG_SOURCE_DIR) + "/assets/demo/train.json");
  detseg::CocoDataset subset;
  subset.categories = all.categories;
  for (int i = 0; i < n; ++i) subset.images.push_back(all.images[static_cast<size_t>(i)]);
  for (const auto& a : all.annotations)
    for (const auto& img : subset.images)
      if (a.image_id == img.id) subset.annotations.push_back(a);
  std::string path = dir + "/subset.json";
  detseg::write_coco(subset, path);
  return path;
}

// The learning regression's budget and floors (see DemoRecipeGeneralisesToHeldOutImages): 150 steps
// of the demo config measured AP 0.335 / AP50 0.572 (2026-12-05, seed 1; per class AP50 RBC 0.715,
// WBC 0.936, Platelets 0.065); the floors leave ~25% for noise. The plain head at a 256 square
// stood at AP 0.115 after 125 steps of a 600-step run (docs/training.md): far below them.
constexpr int64_t kLearningSteps = 150;
constexpr double kLearningMinAp = 0.25, kLearningMinAp50 = 0.45;

}  // namespace

TEST(Overfit, RetinaNetOnTwoRealImagesReachesAp50One) {
  const detseg::testing::TempDir dir_temp("overfit");
  const std::string dir = dir_temp.str();
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string annotations = write_subset(dir, 2);
  const std::string images = std::string(DETSEG_SOURCE_DIR) + "/assets/demo/images";
  const std::string yaml = detseg::str(
      "model: {type: retinanet, num_classes: 3, backbone: resnet18, image_size: 256, frozen_batch_norm: false,\n"
      "        trainable_backbone_stages: 5, fpn_channels: 64}\n"
      "postprocess: {max_detection_points: 1000, score_threshold: 0.05}\n"
      "train: {batch_size: 2, num_steps: 240, seed: 3, checkpoint_every: 240, log_every: 40,\n"
      "        optimizer: {type: adam}, clip_gradients_norm: 10.0,\n"
      "        schedule: {type: cosine, learning_rate: 0.001, warmup_steps: 20, warmup_init: 0.0001}}\n"
      "train_input: {annotations: '", annotations, "', images: '", images, "', num_workers: 1}\n"
      "eval: {batch_size: 2}\n"
      "eval_input: {annotations: '", annotations, "', images: '", images, "', num_workers: 1}\n");
  detseg::PipelineConfig config = detseg::parse_config(yaml, dir + "/overfit.yaml");
  detseg::TrainResult result = detseg::train_model(config, dir + "/model");
  EXPECT_EQ(result.step, 240);
  EXPECT_LT(result.last_loss, 0.1 * result.first_loss) << "first " << result.first_loss << " last " << result.last_loss;

  int64_t step = 0;
  auto model = detseg::load_detector(config, result.last_checkpoint, &step);
  const detseg::EvalReport eval = detseg::evaluate_model(config, *model, step);
  EXPECT_EQ(step, 240);
  EXPECT_EQ(eval.num_images, 2);
  EXPECT_GE(eval.metrics.get("AP50"), 0.99) << eval.text;
}

// Learning regression: the README's demo recipe (configs/demo/retinanet_r18_bccd.yaml), cut short,
// trained on the 60 bundled BCCD training images and scored on the 20 held-out validation images.
// Not memorisation: a change that slows or breaks learning (loss, assignment, augmentation, the
// optimizer) drops these numbers. Thresholds: measured values (docs/training.md, "The demo
// recipe") less a margin for run-to-run noise.
TEST(Learning, DemoRecipeGeneralisesToHeldOutImages) {
  const detseg::testing::TempDir dir_temp("learning");
  const std::string dir = dir_temp.str();
  fs::remove_all(dir);
  const detseg::PipelineConfig config = detseg::load_config(
      std::string(DETSEG_SOURCE_DIR) + "/configs/demo/retinanet_r18_bccd.yaml",
      {"train.num_steps=" + std::to_string(kLearningSteps), "eval.every_steps=0", "train.checkpoint_every=100000",
       "train_input.num_workers=1", "eval_input.num_workers=1"});
  detseg::TrainResult result = detseg::train_model(config, dir);
  ASSERT_EQ(result.step, kLearningSteps);
  int64_t step = 0;
  auto model = detseg::load_detector(config, result.last_checkpoint, &step);
  const detseg::EvalReport eval = detseg::evaluate_model(config, *model, step);
  EXPECT_EQ(eval.num_images, 20);
  EXPECT_GE(eval.metrics.get("AP"), kLearningMinAp) << eval.text;
  EXPECT_GE(eval.metrics.get("AP50"), kLearningMinAp50) << eval.text;
  fs::remove_all(dir);
}
