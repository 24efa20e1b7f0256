// Tests: the two-stage heads' loss terms (losses/two_stage_loss.h), worked by hand.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>

#include "detseg/losses/two_stage_loss.h"

namespace {

// Sigmoid cross-entropy of logit x against label y: log(1 + e^x) - x y.
double bce(double x, double y) { return std::log1p(std::exp(x)) - x * y; }

TEST(TwoStageLoss, RpnTermsAverageOverTheSampledAnchors) {
  // Anchor 0: positive, sampled; anchor 1: negative, sampled; anchor 2: not sampled (its huge
  // error and logit must not count).
  const at::Tensor objectness = at::tensor({0.0f, 2.0f, 5.0f});
  const at::Tensor encodings = at::tensor({0.5f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 9.f, 9.f, 9.f, 9.f}).view({3, 4});
  const at::Tensor positive = at::tensor({1, 0, 0}, at::kLong).to(at::kBool);
  const at::Tensor reg_targets = at::zeros({3, 4});
  const at::Tensor reg_weights = at::tensor({1.0f, 0.0f, 0.0f});
  const at::Tensor sampled = at::tensor({1.0f, 1.0f, 0.0f});
  auto [loc, obj] = detseg::rpn_image_loss(objectness, encodings, positive, reg_targets, reg_weights, sampled);
  EXPECT_NEAR(obj.item<double>(), (bce(0, 1) + bce(2, 0)) / 2, 1e-6);
  EXPECT_NEAR(loc.item<double>(), 0.5 * 0.25 / 2, 1e-7);  // Huber(0.5) = 0.5 d^2, over 2 sampled
  // Nothing sampled: the normaliser stays 1, the terms 0.
  auto [loc0, obj0] = detseg::rpn_image_loss(objectness, encodings, positive, reg_targets, reg_weights, at::zeros({3}));
  EXPECT_EQ(loc0.item<double>(), 0.0);
  EXPECT_EQ(obj0.item<double>(), 0.0);
}

TEST(TwoStageLoss, BoxClassifierTermsReadTheTargetClassRow) {
  // Two proposals, 2 classes + background. Row 0: class 2; row 1: background (weight 0 for the box).
  const at::Tensor logits = at::tensor({0.0f, 0.0f, std::log(3.0f), 1.0f, 0.0f, 0.0f}).view({2, 3});
  const at::Tensor codes = at::tensor({9.f, 9.f, 9.f, 9.f, 0.2f, 0.f, 0.f, -2.f,  // proposal 0: class 1, class 2
                                       7.f, 7.f, 7.f, 7.f, 7.f, 7.f, 7.f, 7.f})  // proposal 1
                               .view({2, 2, 4});
  const at::Tensor targets = at::tensor({2, 0}, at::kLong);
  const at::Tensor cls_weights = at::tensor({1.0f, 0.5f});
  const at::Tensor reg_targets = at::zeros({2, 4});
  const at::Tensor reg_weights = at::tensor({1.0f, 0.0f});
  auto [loc, ce] = detseg::box_classifier_loss(logits, codes, targets, cls_weights, reg_targets, reg_weights, false);
  // Softmax: p(2) = 3 / 5; background row p(0) = e / (e + 2), weighted 0.5.
  EXPECT_NEAR(ce[0].item<double>(), -std::log(0.6), 1e-6);
  EXPECT_NEAR(ce[1].item<double>(), -0.5 * std::log(std::exp(1.0) / (std::exp(1.0) + 2)), 1e-6);
  // Huber(0.2) = 0.02, Huber(-2) = 2 - 0.5; class 1's row (9s) is not read.
  EXPECT_NEAR(loc[0].item<double>(), 0.02 + 1.5, 1e-6);
  EXPECT_EQ(loc[1].item<double>(), 0.0);
  // Sigmoid: each class's logit against its one-hot label, background column included.
  auto [loc_s, ce_s] = detseg::box_classifier_loss(logits, codes, targets, cls_weights, reg_targets, reg_weights, true);
  EXPECT_NEAR(ce_s[0].item<double>(), bce(0, 0) + bce(0, 0) + bce(std::log(3.0), 1), 1e-6);
  EXPECT_NEAR(ce_s[1].item<double>(), 0.5 * (bce(1, 1) + bce(0, 0) + bce(0, 0)), 1e-6);
  EXPECT_TRUE(at::equal(loc_s, loc));
  // One box shared by every class: that row, whatever the class.
  auto [loc_shared, unused] = detseg::box_classifier_loss(logits, codes.slice(1, 1, 2), targets, cls_weights,
                                                          reg_targets, reg_weights, false);
  EXPECT_NEAR(loc_shared[0].item<double>(), 1.52, 1e-6);
}

TEST(TwoStageLoss, MaskTermAveragesOverPositivesAndPixels) {
  const at::Tensor logits = at::tensor({0.0f, 0.0f, 2.0f, -2.0f}).view({2, 1, 2});
  const at::Tensor targets = at::tensor({1.0f, 0.0f, 1.0f, 1.0f}).view({2, 1, 2});
  const double want = (bce(0, 1) + bce(0, 0) + bce(2, 1) + bce(-2, 1)) / 4;
  EXPECT_NEAR(detseg::mask_loss(logits, targets).item<double>(), want, 1e-6);
  // bf16 logits (autocast): the loss is fp32.
  EXPECT_EQ(detseg::mask_loss(logits.to(at::kBFloat16), targets).scalar_type(), at::kFloat);
  EXPECT_EQ(detseg::mask_loss(at::zeros({0, 4, 4}), at::zeros({0, 4, 4})).item<double>(), 0.0);
}

}  // namespace
