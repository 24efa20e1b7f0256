// Tests: under autocast the heads hand the losses bf16/fp16 tensors; every loss must compute in
// fp32 (upcast at its entry), return float32, and agree with the fp32 value of the same logits
// (within 1e-2 relative: only the rounding of the inputs to bf16 differs). Gradients flow back
// to the low-precision inputs in their own dtype.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>

#include "detseg/losses/detection_loss.h"
#include "detseg/losses/focal_loss.h"
#include "detseg/losses/huber_loss.h"
#include "detseg/losses/segmentation_loss.h"
#include "detseg/structures/tensor_utils.h"

namespace {

// The fp32 reference is computed on the bf16-rounded values, so the comparison isolates the
// precision of the loss arithmetic (a bf16 computation would sum thousands of terms in bf16).
at::Tensor rounded_to(const at::Tensor& x, at::ScalarType t) { return x.to(t).to(at::kFloat); }

void expect_close_rel(const at::Tensor& low, const at::Tensor& ref, double rel) {
  ASSERT_EQ(low.scalar_type(), at::kFloat);
  const double a = low.item<double>(), b = ref.item<double>();
  EXPECT_NEAR(a, b, rel * std::max(1e-12, std::abs(b))) << "low precision " << a << " vs fp32 " << b;
}

class LowPrecisionLoss : public ::testing::TestWithParam<at::ScalarType> {};

TEST(UpcastLowPrecision, CastsOnlyHalfAndBFloat16) {
  at::Tensor f = at::ones({2}), d = at::ones({2}, at::kDouble), l = at::ones({2}, at::kLong);
  EXPECT_TRUE(detseg::upcast_low_precision(f).is_same(f));  // fp32 passes through untouched
  EXPECT_TRUE(detseg::upcast_low_precision(d).is_same(d));
  EXPECT_TRUE(detseg::upcast_low_precision(l).is_same(l));
  EXPECT_EQ(detseg::upcast_low_precision(f.to(at::kBFloat16)).scalar_type(), at::kFloat);
  EXPECT_EQ(detseg::upcast_low_precision(f.to(at::kHalf)).scalar_type(), at::kFloat);
  EXPECT_FALSE(detseg::upcast_low_precision(at::Tensor()).defined());
  EXPECT_TRUE(detseg::host_value_checks(f));
}

TEST_P(LowPrecisionLoss, FocalDenseMatchesFp32AndReturnsFloat) {
  const auto dt = GetParam();
  at::manual_seed(0);
  const at::Tensor logits = at::randn({2, 3000, 8}) * 3;
  const at::Tensor labels = at::randint(-2, 8, {2, 3000}, at::kLong);
  const at::Tensor norm = at::scalar_tensor(123.0);
  const at::Tensor ref = detseg::focal_loss_dense(rounded_to(logits, dt), labels, norm);
  const at::Tensor low = logits.to(dt).requires_grad_(true);
  const at::Tensor got = detseg::focal_loss_dense(low, labels, norm.to(dt));
  expect_close_rel(got, ref, 1e-2);
  got.backward();
  ASSERT_TRUE(low.grad().defined());
  EXPECT_EQ(low.grad().scalar_type(), dt);
  EXPECT_TRUE(at::isfinite(low.grad().to(at::kFloat)).all().item<bool>());
  // The composite form (used off the CPU) upcasts the same way.
  const at::Tensor composite = detseg::focal_loss_dense_composite(logits.to(dt), labels, norm.to(dt));
  expect_close_rel(composite, ref, 1e-2);
  // And the one-hot form.
  const at::Tensor targets = at::rand({50, 8}).gt(0.7).to(at::kFloat);
  const at::Tensor x = at::randn({50, 8});
  expect_close_rel(detseg::focal_loss(x.to(dt), targets, at::scalar_tensor(7.0).to(dt)),
                   detseg::focal_loss(rounded_to(x, dt), targets, at::scalar_tensor(7.0)), 1e-2);
  EXPECT_EQ(detseg::focal_loss_elementwise(x.to(dt), targets).scalar_type(), at::kFloat);
}

TEST_P(LowPrecisionLoss, HuberAndSmoothL1MatchFp32AndReturnFloat) {
  const auto dt = GetParam();
  at::manual_seed(1);
  const at::Tensor out = at::randn({4, 500, 4}) * 0.3;
  const at::Tensor tgt = at::randn({4, 500, 4}).mul_(at::rand({4, 500, 1}).gt(0.5));
  const at::Tensor np = at::scalar_tensor(301.0);
  expect_close_rel(detseg::huber_box_loss(out.to(dt), tgt, np.to(dt)),
                   detseg::huber_box_loss(rounded_to(out, dt), tgt, np), 1e-2);
  EXPECT_EQ(detseg::huber_loss_elementwise(out.to(dt), tgt, 0.1).scalar_type(), at::kFloat);
  expect_close_rel(detseg::smooth_l1_loss_sum(out.to(dt), tgt, 1.0 / 9),
                   detseg::smooth_l1_loss_sum(rounded_to(out, dt), tgt, 1.0 / 9), 1e-2);
  expect_close_rel(detseg::smooth_l1_loss_sum(out.to(dt), tgt, 0.0),
                   detseg::smooth_l1_loss_sum(rounded_to(out, dt), tgt, 0.0), 1e-2);
}

TEST_P(LowPrecisionLoss, DetectionLossMatchesFp32AndCountsPositivesExactly) {
  const auto dt = GetParam();
  at::manual_seed(2);
  const int64_t n = 2, a = 4000, k = 5;
  const at::Tensor cls = at::randn({n, a, k}), box = at::randn({n, a, 4}) * 0.2;
  at::Tensor cls_t = at::randint(-2, k, {n, a}, at::kLong);
  const at::Tensor box_t = at::randn({n, a, 4}) * (cls_t >= 0).unsqueeze(-1).to(at::kFloat);
  const auto ref = detseg::detection_loss(rounded_to(cls, dt), rounded_to(box, dt), cls_t, box_t);
  const auto got = detseg::detection_loss(cls.to(dt), box.to(dt), cls_t, box_t);
  // Thousands of positives: bf16 could not hold the count (integers exact only up to 256).
  EXPECT_EQ(got.num_positives.scalar_type(), at::kFloat);
  EXPECT_EQ(got.num_positives.item<double>(), ref.num_positives.item<double>());
  EXPECT_EQ(got.num_positives.item<double>(), (cls_t >= 0).sum().item<double>() + 1);
  expect_close_rel(got.cls, ref.cls, 1e-2);
  expect_close_rel(got.box, ref.box, 1e-2);
  expect_close_rel(got.total, ref.total, 1e-2);
}

TEST_P(LowPrecisionLoss, SoftmaxCrossEntropyMatchesFp32AndReturnsFloat) {
  const auto dt = GetParam();
  at::manual_seed(3);
  const at::Tensor logits = at::randn({2, 6, 9, 9}) * 2;
  at::Tensor labels = at::randint(0, 6, {2, 33, 33}, at::kLong);
  labels.masked_fill_(at::rand({2, 33, 33}).gt(0.9), 255);
  for (bool upsample : {true, false}) {
    for (double top_k : {1.0, 0.25}) {
      auto o = detseg::SegmentationLossOptions().upsample_logits(upsample).top_k_percent_pixels(top_k);
      expect_close_rel(detseg::softmax_cross_entropy_loss(logits.to(dt), labels, o),
                       detseg::softmax_cross_entropy_loss(rounded_to(logits, dt), labels, o), 1e-2);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BFloat16AndHalf, LowPrecisionLoss, ::testing::Values(at::kBFloat16, at::kHalf),
                         [](const ::testing::TestParamInfo<at::ScalarType>& info) {
                           return std::string(info.param == at::kBFloat16 ? "bf16" : "fp16");
                         });

TEST(SegmentationLoss, NearestAlignedResizeIndicesMatchStdRound) {
  // resize_labels_nearest builds its indices with tensor ops (on the labels' device): they must
  // equal round(i * (H - 1) / (h - 1)) in float32 with std::round, ties away from zero.
  for (int64_t in : {1, 2, 5, 17, 33, 65, 129, 513}) {
    for (int64_t out : {1, 2, 3, 9, 17, 33, 65, 257, 1025}) {
      const at::Tensor labels = at::arange(in, at::kLong).view({1, in, 1}).expand({1, in, 2}).contiguous();
      const at::Tensor got = detseg::resize_labels_nearest(labels, out, 2).select(2, 0)[0];
      const float scale = out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
      for (int64_t i = 0; i < out; ++i) {
        const int64_t want =
            std::min<int64_t>(in - 1, static_cast<int64_t>(std::round(static_cast<float>(i) * scale)));
        ASSERT_EQ(got[i].item<int64_t>(), want) << in << " -> " << out << " at " << i;
      }
    }
  }
}

}  // namespace
