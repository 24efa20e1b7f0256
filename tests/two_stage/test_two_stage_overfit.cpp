// Tests: Faster R-CNN and Mask R-CNN trained end to end through the real engine (config -> dataset
// -> loader -> meta-architecture -> train loop -> checkpoint -> evaluation) on two real images
// drive their losses down and find every object again (box and mask AP50 near 1; the C4 layout at
// least two of its three), Mask R-CNN in both the FPN and the C4 layout. Each floor sits well below what bench/learning_spread.sh measured
// under every kernel set, thread count and several seeds (the comments give the ranges), and far
// above what a model that does not learn scores.
#include <gtest/gtest.h>

#include <filesystem>

#include "detseg/config/config.h"
#include "detseg/engine/evaluate.h"
#include "detseg/engine/train_loop.h"
#include "measured.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace {

// Trains tests/fixtures/learning/<name>.yaml (bench/learning_spread.sh measures the same file) and
// evaluates the last checkpoint on the training images.
detseg::EvalReport train_and_evaluate(const std::string& name) {
  const detseg::testing::TempDir dir("overfit_" + name);
  const detseg::PipelineConfig config =
      detseg::load_config(std::string(DETSEG_SOURCE_DIR) + "/tests/fixtures/learning/" + name + ".yaml");
  const detseg::TrainResult result = detseg::train_model(config, (dir / "model").string());
  EXPECT_EQ(result.step, config.train.num_steps);
  EXPECT_LT(result.last_loss, 0.25 * result.first_loss) << "first " << result.first_loss << " last " << result.last_loss;
  auto model = detseg::load_detector(config, result.last_checkpoint);
  detseg::EvalReport eval = detseg::evaluate_model(config, *model, config.train.num_steps);
  EXPECT_EQ(eval.num_images, 2);
  detseg::testing::print_measured(eval.metrics, {"AP", "AP50", "segm_AP", "segm_AP50"});
  return eval;
}

}  // namespace

TEST(TwoStageOverfit, FasterRcnnOnTwoBccdImagesFindsEveryObject) {
  // Image 1's one platelet is ~10 px at 192: anchors start at 8 px so that it gets a close anchor.
  // After 90 steps it was found or missed by rounding alone (AP50 1.0 or 0.66: a class of one
  // instance is a third of the mean), so the run is 150 steps, where every run measured finds it.
  // Measured 2026-12-06 on an AMD EPYC (Zen 3, AVX2, 2 cores) with `bash bench/learning_spread.sh
  // tests/fixtures/learning/faster_rcnn_overfit.yaml --seeds "3 7 8" --threads "2 1"` (kernel sets
  // native = AVX2, default/SSE41, avx2 + oneDNN AVX; 18 runs) and seeds 4-6 natively: AP50
  // 0.986-1.000, AP 0.858-0.985. On an Intel Xeon (Sapphire Rapids: AVX-512, AMX; 2 cores),
  // 2026-12-07, the test itself: AP50 / AP 0.987 / 0.902 natively (ATen AVX512, oneDNN
  // avx10_1_512_amx), 0.996 / 0.883 under ATen default + oneDNN SSE41, 0.987 / 0.985 under ATen
  // avx2 + oneDNN AVX2. With no learning (10 steps at learning rate 1e-9) AP50 is 0.006.
  const detseg::EvalReport eval = train_and_evaluate("faster_rcnn_overfit");
  EXPECT_GE(eval.metrics.get("AP50"), 0.95) << eval.text;
  EXPECT_GE(eval.metrics.get("AP"), 0.75) << eval.text;
}

TEST(TwoStageOverfit, MaskRcnnOnTwoCoco128ImagesReachesBoxAndMaskAp50One) {
  if (!std::filesystem::exists(std::string(DETSEG_SHARED_DIR) + "/data/coco128"))
    GTEST_SKIP() << "../shared/data/coco128 not found: Mask R-CNN overfit not run";
  // Measured 2026-12-06 on an AMD EPYC (Zen 3, AVX2, 2 cores), seed 3, 2 threads, under the native
  // kernels (AVX2), ATen default + oneDNN SSE41 and ATen avx2 + oneDNN AVX: box AP 0.933-0.967, box
  // and mask AP50 1.000 in all three. On an Intel Xeon (Sapphire Rapids: AVX-512, AMX; 2 cores),
  // 2026-12-07, the test itself: box and mask AP50 1.000 under the native (AVX-512), default/SSE41
  // and avx2/AVX2 sets, box AP 0.833-1.000. With no learning (10 steps at learning rate 1e-9) both
  // are 0.
  const detseg::EvalReport eval = train_and_evaluate("mask_rcnn_overfit");
  EXPECT_GE(eval.metrics.get("AP50"), 0.95) << eval.text;
  EXPECT_GE(eval.metrics.get("segm_AP50"), 0.95) << eval.text;
}

TEST(TwoStageOverfit, C4MaskRcnnOnTwoCoco128ImagesFindsAndMasksItsObjects) {
  if (!std::filesystem::exists(std::string(DETSEG_SHARED_DIR) + "/data/coco128"))
    GTEST_SKIP() << "../shared/data/coco128 not found: C4 Mask R-CNN overfit not run";
  // Three objects, so AP50 moves in steps of about a third, and the C4 layout learns them less
  // surely in 90 steps than the FPN one: with 8x8 masks segm AP50 was 1.0 natively but 0.67 under
  // ATen avx2 + oneDNN AVX; with 12x12 masks, measured 2026-12-06 on an AMD EPYC (Zen 3, AVX2, 2
  // cores) with bench/learning_spread.sh and the test itself: box and mask AP50 1.000 natively and
  // under ATen avx2 + oneDNN AVX, 0.833 / 0.833 (seed 3) and 1.000 / 1.000 (seed 4) under ATen
  // default + oneDNN SSE41. On an Intel Xeon (Sapphire Rapids: AVX-512, AMX; 2 cores), 2026-12-07,
  // the test itself: box and mask AP50 1.000 natively (AVX-512) and under avx2/AVX2; box 1.000,
  // mask 0.778 under default/SSE41. The floor asks for at least two of the three objects found and
  // masked (0.6); with no learning (10 steps at learning rate 1e-9) both AP50 are 0.
  const detseg::EvalReport eval = train_and_evaluate("mask_rcnn_c4_overfit");
  EXPECT_GE(eval.metrics.get("AP50"), 0.6) << eval.text;
  EXPECT_GE(eval.metrics.get("segm_AP50"), 0.6) << eval.text;
}
