// Tests: Faster R-CNN and Mask R-CNN trained end to end through the real engine (config -> dataset
// -> loader -> meta-architecture -> train loop -> checkpoint -> evaluation) on two real images
// drive their losses down and find every object again: box AP50 = 1 (and mask AP50 = 1), Mask R-CNN
// in both the FPN and the C4 layout.
#include <gtest/gtest.h>

#include <filesystem>

#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/data/readers/coco.h"
#include "detseg/engine/evaluate.h"
#include "detseg/engine/train_loop.h"

namespace fs = std::filesystem;

namespace {

// A COCO file holding the images `ids` (by position) of `source`, without crowd annotations.
std::string write_subset(const std::string& source, const std::string& dir, const std::vector<int>& picks) {
  detseg::CocoDataset all = detseg::read_coco(source);
  detseg::CocoDataset subset;
  subset.categories = all.categories;
  for (int i : picks) subset.images.push_back(all.images[static_cast<size_t>(i)]);
  for (const auto& a : all.annotations)
    for (const auto& img : subset.images)
      if (a.image_id == img.id && !a.iscrowd) subset.annotations.push_back(a);
  std::string path = dir + "/subset.json";
  detseg::write_coco(subset, path);
  return path;
}

detseg::EvalReport train_and_evaluate(const std::string& name, const std::string& model_yaml,
                                               const std::string& source, const std::string& images,
                                               const std::vector<int>& picks, int steps) {
  const std::string dir = (fs::temp_directory_path() / ("detseg_overfit_" + name)).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string annotations = write_subset(source, dir, picks);
  const std::string yaml = detseg::str(
      model_yaml,
      "train: {batch_size: 2, num_steps: ", steps, ", seed: 3, checkpoint_every: ", steps, ", log_every: 40,\n"
      "        optimizer: {type: adam}, clip_gradients_norm: 10.0,\n"
      "        schedule: {type: cosine, learning_rate: 0.002, warmup_steps: 10, warmup_init: 0.0002}}\n"
      "train_input: {annotations: '", annotations, "', images: '", images, "', num_workers: 1}\n"
      "eval: {batch_size: 2}\n"
      "eval_input: {annotations: '", annotations, "', images: '", images, "', num_workers: 1}\n");
  detseg::PipelineConfig config = detseg::parse_config(yaml, dir + "/overfit.yaml");
  detseg::TrainResult result = detseg::train_model(config, dir + "/model");
  EXPECT_EQ(result.step, steps);
  EXPECT_LT(result.last_loss, 0.25 * result.first_loss) << "first " << result.first_loss << " last " << result.last_loss;
  auto model = detseg::load_detector(config, result.last_checkpoint);
  detseg::EvalReport eval = detseg::evaluate_model(config, *model, steps);
  EXPECT_EQ(eval.num_images, static_cast<int64_t>(picks.size()));
  fs::remove_all(dir);
  return eval;
}

}  // namespace

TEST(TwoStageOverfit, FasterRcnnOnTwoBccdImagesReachesAp50One) {
  // Image 1's one platelet is ~10 px at 192: anchors start at 8 px so that it gets a close anchor.
  // From 16 px it was found or missed (AP50 1 or 0.66) by float rounding alone: the order of the
  // sums in a conv (oneDNN direct or Winograd) flipped it. Still close to the line: in session 5,
  // with ResNet-18's layer2 convs summed in another order, this run ended at AP50 0.986 (one RBC of
  // 33 missed); as the convs run now (oneDNN's direct kernel) it ends at 1.
  const std::string model =
      "model: {type: faster_rcnn, num_classes: 3, backbone: resnet18, image_size: 192, frozen_batch_norm: false,\n"
      "        trainable_backbone_stages: 3, fpn_channels: 32,\n"
      "        faster_rcnn: {first_stage_box_predictor_depth: 32, first_stage_anchor_sizes: [8, 16, 32, 64, 128],\n"
      "                      first_stage_pre_nms_top_k: 1000, first_stage_max_proposals: 100,\n"
      "                      second_stage_batch_size: 64, second_stage_add_groundtruth_proposals: true,\n"
      "                      representation_size: 128}}\n"
      "postprocess: {score_threshold: 0.05}\n";
  detseg::EvalReport eval =
      train_and_evaluate("faster_rcnn", model, std::string(DETSEG_SOURCE_DIR) + "/assets/demo/train.json",
                         std::string(DETSEG_SOURCE_DIR) + "/assets/demo/images", {0, 1}, 90);
  EXPECT_GE(eval.metrics.get("AP50"), 0.99) << eval.text;
}

TEST(TwoStageOverfit, MaskRcnnOnTwoCoco128ImagesReachesBoxAndMaskAp50One) {
  // A zebra, and an umbrella over a person: three large instances with polygon masks.
  const std::string coco = std::string(DETSEG_SHARED_DIR) + "/data/coco128";
  if (!fs::exists(coco)) GTEST_SKIP() << coco << " not found: Mask R-CNN overfit not run";
  const std::string model =
      "model: {type: mask_rcnn, num_classes: 80, backbone: resnet18, image_size: 192, frozen_batch_norm: false,\n"
      "        trainable_backbone_stages: 3, fpn_channels: 32,\n"
      "        faster_rcnn: {number_of_stages: 3, first_stage_box_predictor_depth: 32,\n"
      "                      first_stage_pre_nms_top_k: 1000, first_stage_max_proposals: 100,\n"
      "                      second_stage_batch_size: 64, second_stage_add_groundtruth_proposals: true,\n"
      "                      representation_size: 128, mask_head_depth: 32}}\n"
      "postprocess: {score_threshold: 0.05}\n";
  detseg::EvalReport eval =
      train_and_evaluate("mask_rcnn", model, coco + "/annotations/instances_val2017.json", coco + "/val2017", {3, 4}, 90);
  EXPECT_GE(eval.metrics.get("AP50"), 0.99) << eval.text;
  EXPECT_GE(eval.metrics.get("segm_AP50"), 0.99) << eval.text;
}

TEST(TwoStageOverfit, C4MaskRcnnOnTwoCoco128ImagesReachesBoxAndMaskAp50One) {
  // The same two images with the reference's C4 layout: RPN on layer3 (one anchor grid), layer4 at
  // stride 1 on the max-pooled crops for both the box classifier and the mask head. layer4 on every
  // region dominates the step, so few regions of 8 pooled to 4 (masks 8x8) keep it short.
  const std::string coco = std::string(DETSEG_SHARED_DIR) + "/data/coco128";
  if (!fs::exists(coco)) GTEST_SKIP() << coco << " not found: C4 Mask R-CNN overfit not run";
  const std::string model =
      "model: {type: mask_rcnn, num_classes: 80, backbone: resnet18, image_size: 192, frozen_batch_norm: false,\n"
      "        trainable_backbone_stages: 3,\n"
      "        faster_rcnn: {feature_extractor: c4, number_of_stages: 3, first_stage_box_predictor_depth: 32,\n"
      "                      first_stage_anchor_sizes: [128], first_stage_anchor_scales: [0.25, 0.5, 1.0, 2.0],\n"
      "                      first_stage_anchor_aspect_ratios: [0.5, 1.0, 2.0],\n"
      "                      first_stage_pre_nms_top_k: 1000, first_stage_max_proposals: 32,\n"
      "                      second_stage_batch_size: 16, second_stage_add_groundtruth_proposals: true,\n"
      "                      initial_crop_size: 8, mask_head_depth: 32}}\n"
      "postprocess: {score_threshold: 0.05}\n";
  detseg::EvalReport eval = train_and_evaluate(
      "c4_mask_rcnn", model, coco + "/annotations/instances_val2017.json", coco + "/val2017", {3, 4}, 90);
  EXPECT_GE(eval.metrics.get("AP50"), 0.99) << eval.text;
  EXPECT_GE(eval.metrics.get("segm_AP50"), 0.99) << eval.text;
}
