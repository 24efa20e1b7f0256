// Tests: DeepLab's per-scale softmax cross-entropy against values worked out by hand: the ignore
// label (255 and a configurable one), the loss weight and per-class weights, top-k pixel mining and its ramp over
// hard_example_mining_step, the safe division when nothing is present, label downsampling
// (nearest, aligned corners) and logit upsampling (bilinear, aligned corners).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "detseg/core/error.h"
#include "detseg/losses/segmentation_loss.h"

namespace {

using detseg::SegmentationLossOptions;
using detseg::softmax_cross_entropy_loss;

// Two classes; class 1's logit is 0, so a pixel of label 1 with class-0 logit v costs
// log(1 + e^v), and one of label 0 costs log(1 + e^-v).
double ce_label1(double v) { return std::log1p(std::exp(v)); }
double ce_label0(double v) { return std::log1p(std::exp(-v)); }

// logits [1, 2, 1, n] with class-0 logits `v` and class-1 logits 0.
at::Tensor two_class_logits(const std::vector<float>& v) {
  const int64_t n = static_cast<int64_t>(v.size());
  at::Tensor logits = at::zeros({1, 2, 1, n});
  for (int64_t i = 0; i < n; ++i) logits[0][0][0][i] = v[static_cast<size_t>(i)];
  return logits;
}

at::Tensor labels_of(const std::vector<int64_t>& l) {
  return at::tensor(l, at::kLong).reshape({1, 1, static_cast<int64_t>(l.size())});
}

TEST(SegLoss, IgnoredPixelsAreMaskedAndTheMeanIsOverTheRest) {
  // Pixels: label 0 with v 0 (ln 2), label 1 with v 1 (log(1 + e)), ignored pixel with v 5.
  const at::Tensor logits = two_class_logits({0, 1, 5});
  const at::Tensor labels = labels_of({0, 1, 255});
  const double expected = (std::log(2.0) + ce_label1(1)) / 2;  // 1.0032046
  EXPECT_NEAR(softmax_cross_entropy_loss(logits, labels, {}).item<double>(), expected, 1e-6);
  EXPECT_NEAR(expected, 1.0032046, 1e-6);
  // The reference's weights are not_ignore x loss_weight and its reduction divides by the count of
  // non-zero weights: a loss weight of 2 doubles the value.
  EXPECT_NEAR(softmax_cross_entropy_loss(logits, labels, SegmentationLossOptions().loss_weight(2)).item<double>(),
              2 * expected, 1e-6);
}

TEST(SegLoss, ClassWeightsScaleEachPixelAndAZeroWeightLeavesTheCount) {
  // Pixels: label 0 (v 0: ln 2), label 1 (v 1: log(1 + e)), label 1 (v 2: log(1 + e^2)), ignored.
  const at::Tensor logits = two_class_logits({0, 1, 2, 5});
  const at::Tensor labels = labels_of({0, 1, 1, 255});
  // Weights 3 (class 0) and 0.5 (class 1), loss weight 2: per pixel 6, 1, 1, 0; three non-zero.
  const auto o = SegmentationLossOptions().loss_weight(2).class_weights({3.0, 0.5});
  const double expected = (6 * std::log(2.0) + ce_label1(1) + ce_label1(2)) / 3;  // 2.5330
  EXPECT_NEAR(expected, 2.5330, 1e-4);
  EXPECT_NEAR(softmax_cross_entropy_loss(logits, labels, o).item<double>(), expected, 1e-5);
  // A class weighed 0 leaves the count as the ignore label does (SUM_BY_NONZERO_WEIGHTS).
  EXPECT_NEAR(softmax_cross_entropy_loss(logits, labels, SegmentationLossOptions().class_weights({0.0, 1.0}))
                  .item<double>(),
              (ce_label1(1) + ce_label1(2)) / 2, 1e-6);
  // With mining, the weighted losses are ranked: 50% of 4 = 2 pixels, 6 ln 2 = 4.159 and 2.127.
  EXPECT_NEAR(softmax_cross_entropy_loss(logits, labels, SegmentationLossOptions(o).top_k_percent_pixels(0.5))
                  .item<double>(),
              (6 * std::log(2.0) + ce_label1(2)) / 2, 1e-5);
  // One weight per class, or an error that says so.
  EXPECT_THROW(softmax_cross_entropy_loss(logits, labels, SegmentationLossOptions().class_weights({1.0})),
               detseg::Error);
}

TEST(SegLoss, TheIgnoreLabelIsConfigurable) {
  // ignore_label 1: the label-1 pixel drops out, 255 becomes an error (not a class, not ignored).
  const at::Tensor logits = two_class_logits({0, 1, 2});
  EXPECT_NEAR(softmax_cross_entropy_loss(logits, labels_of({0, 1, 0}), SegmentationLossOptions().ignore_label(1))
                  .item<double>(),
              (std::log(2.0) + ce_label0(2)) / 2, 1e-6);
  EXPECT_THROW(softmax_cross_entropy_loss(logits, labels_of({0, 255, 0}), SegmentationLossOptions().ignore_label(1)),
               detseg::Error);
}

TEST(SegLoss, TopKPercentPixelsKeepsTheLargestLosses) {
  // Losses ln 2 = 0.693, log(1+e) = 1.313, log(1+e^2) = 2.127, and an ignored pixel (0).
  const at::Tensor logits = two_class_logits({0, 1, 2, 7});
  const at::Tensor labels = labels_of({0, 1, 1, 255});
  // 50% of 4 pixels = 2: the two largest, divided by 2.
  const double top2 = (ce_label1(2) + ce_label1(1)) / 2;  // 1.7200951
  EXPECT_NEAR(top2, 1.7200951, 1e-6);
  EXPECT_NEAR(softmax_cross_entropy_loss(logits, labels, SegmentationLossOptions().top_k_percent_pixels(0.5))
                  .item<double>(),
              top2, 1e-6);
  // 25% = 1 pixel.
  EXPECT_NEAR(softmax_cross_entropy_loss(logits, labels, SegmentationLossOptions().top_k_percent_pixels(0.25))
                  .item<double>(),
              ce_label1(2), 1e-6);
  // Gradient reaches only the kept pixels.
  at::Tensor x = logits.clone().requires_grad_(true);
  softmax_cross_entropy_loss(x, labels, SegmentationLossOptions().top_k_percent_pixels(0.5)).backward();
  const at::Tensor g = x.grad()[0][0][0];
  EXPECT_EQ(g[0].item<float>(), 0.0f);
  EXPECT_NE(g[1].item<float>(), 0.0f);
  EXPECT_NE(g[2].item<float>(), 0.0f);
  EXPECT_EQ(g[3].item<float>(), 0.0f);
}

TEST(SegLoss, MiningRampsFromAllPixelsToTopK) {
  // (r x top_k + 1 - r) x n with r = min(1, step / mining_step).
  EXPECT_EQ(detseg::hard_mining_num_pixels(1000, 0.25, 100, 0), 1000);
  EXPECT_EQ(detseg::hard_mining_num_pixels(1000, 0.25, 100, 50), 625);
  EXPECT_EQ(detseg::hard_mining_num_pixels(1000, 0.25, 100, 100), 250);
  EXPECT_EQ(detseg::hard_mining_num_pixels(1000, 0.25, 100, 400), 250);
  EXPECT_EQ(detseg::hard_mining_num_pixels(1000, 0.25, 0, 0), 250);  // no ramp: at once
  EXPECT_EQ(detseg::hard_mining_num_pixels(10, 0.33, 0, 0), 3);      // truncated

  const at::Tensor logits = two_class_logits({0, 1, 2, 7});
  const at::Tensor labels = labels_of({0, 1, 1, 255});
  auto o = SegmentationLossOptions().top_k_percent_pixels(0.5).hard_example_mining_step(10);
  // Step 0: all 4 pixels kept; the ignored one's loss is 0 and is not counted (num_present = 3).
  EXPECT_NEAR(softmax_cross_entropy_loss(logits, labels, o, 0).item<double>(),
              (std::log(2.0) + ce_label1(1) + ce_label1(2)) / 3, 1e-6);
  // Half way: (0.5 x 0.5 + 0.5) x 4 = 3 pixels, the same three.
  EXPECT_NEAR(softmax_cross_entropy_loss(logits, labels, o, 5).item<double>(),
              (std::log(2.0) + ce_label1(1) + ce_label1(2)) / 3, 1e-6);
  // Full: 2 pixels.
  EXPECT_NEAR(softmax_cross_entropy_loss(logits, labels, o, 10).item<double>(), (ce_label1(2) + ce_label1(1)) / 2,
              1e-6);
}

TEST(SegLoss, NothingPresentGivesZeroNotNaN) {
  const at::Tensor logits = two_class_logits({0, 1, 2}).requires_grad_(true);
  const at::Tensor labels = labels_of({255, 255, 255});
  at::Tensor plain = softmax_cross_entropy_loss(logits, labels, {});
  EXPECT_EQ(plain.item<double>(), 0.0);
  plain.backward();
  EXPECT_TRUE(logits.grad().isfinite().all().item<bool>());
  EXPECT_EQ(softmax_cross_entropy_loss(logits, labels, SegmentationLossOptions().top_k_percent_pixels(0.5)).item<double>(),
            0.0);
  EXPECT_EQ(softmax_cross_entropy_loss(two_class_logits({0, 1}), labels_of({0, 1}),
                                       SegmentationLossOptions().loss_weight(0))
                .item<double>(),
            0.0);
}

TEST(SegLoss, LabelsDownsampleNearestWithAlignedCorners) {
  // 4 -> 2 samples: source rows round(i x 3 / 1) = {0, 3}; 5 -> 3: {0, 2, 4}.
  const at::Tensor labels = at::arange(20, at::kLong).reshape({1, 4, 5});
  const at::Tensor small = detseg::resize_labels_nearest(labels, 2, 3);
  EXPECT_TRUE(at::equal(small, at::tensor({0, 2, 4, 15, 17, 19}, at::kLong).reshape({1, 2, 3})));
  // With upsample_logits false the loss is taken at the logits' size.
  at::Tensor logits = at::zeros({1, 2, 2, 3});
  logits[0][0] = 1;  // class 0 logit 1 everywhere: cost log(1 + e^-1) for label 0, log(1 + e) for 1
  at::Tensor l = at::ones({1, 4, 5}, at::kLong);
  l[0][0][0] = 0;  // the only label-0 pixel is a kept sample (row 0, col 0)
  l[0][1][1] = 0;  // not sampled
  const double expected = (ce_label0(1) + 5 * ce_label1(1)) / 6;
  EXPECT_NEAR(softmax_cross_entropy_loss(logits, l, SegmentationLossOptions().upsample_logits(false)).item<double>(),
              expected, 1e-6);
}

TEST(SegLoss, LogitsUpsampleBilinearWithAlignedCorners) {
  // Class-0 logits [[0, 2], [2, 4]] upsampled to 3x3 with aligned corners are
  // [[0, 1, 2], [1, 2, 3], [2, 3, 4]]; every label is 1.
  at::Tensor logits = at::zeros({1, 2, 2, 2});
  logits[0][0][0][1] = 2;
  logits[0][0][1][0] = 2;
  logits[0][0][1][1] = 4;
  const at::Tensor labels = at::ones({1, 3, 3}, at::kLong);
  double expected = 0;
  for (double v : {0, 1, 2, 1, 2, 3, 2, 3, 4}) expected += ce_label1(v) / 9;
  EXPECT_NEAR(softmax_cross_entropy_loss(logits, labels, {}).item<double>(), expected, 1e-5);
  // Per scale: one loss per logits tensor.
  auto per_scale = detseg::softmax_cross_entropy_loss_per_scale({logits, logits}, labels, {});
  ASSERT_EQ(per_scale.size(), 2u);
  EXPECT_NEAR(per_scale[1].item<double>(), expected, 1e-5);
}

}  // namespace
