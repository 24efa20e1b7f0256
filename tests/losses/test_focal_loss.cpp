// Tests: focal loss against hand-worked values, the EfficientDet reference formula and
// torchvision.ops.sigmoid_focal_loss (fixture from tests/fixtures/make_model_fixtures.py).
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cmath>

#include "detseg/core/files.h"
#include "detseg/losses/focal_loss.h"
#include "test_paths.h"

namespace {

c10::Dict<c10::IValue, c10::IValue> load_fixture() {
  const std::string bytes = detseg::read_file(std::string(DETSEG_SOURCE_DIR) + "/tests/fixtures/losses.pt");
  return torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toGenericDict();
}

at::Tensor get(const c10::Dict<c10::IValue, c10::IValue>& d, const std::string& key) {
  return d.at(key).toTensor();
}

TEST(FocalLoss, HandWorkedAtZeroLogit) {
  // x = 0: p = 0.5, CE = log 2, modulator = 0.5^2; positives weighted 0.25, negatives 0.75.
  at::Tensor logits = at::zeros({2});
  at::Tensor targets = at::tensor({1.0f, 0.0f});
  at::Tensor loss = detseg::focal_loss_elementwise(logits, targets);
  EXPECT_NEAR(loss[0].item<float>(), 0.25 * 0.25 * std::log(2.0), 1e-7);
  EXPECT_NEAR(loss[1].item<float>(), 0.75 * 0.25 * std::log(2.0), 1e-7);
  // Summed and normalised by 2.
  EXPECT_NEAR(detseg::focal_loss(logits, targets, at::scalar_tensor(2.0)).item<float>(),
              (0.25 + 0.75) * 0.25 * std::log(2.0) / 2.0, 1e-7);
}

TEST(FocalLoss, MatchesReferenceFormulaAndTorchvision) {
  auto d = load_fixture();
  const at::Tensor logits = get(d, "logits"), targets = get(d, "targets");
  struct Case {
    const char* name;
    double alpha, gamma;
  };
  for (const Case& c : {Case{"a25_g2", 0.25, 2.0}, Case{"a75_g05", 0.75, 0.5}}) {
    SCOPED_TRACE(c.name);
    at::Tensor ours = detseg::focal_loss_elementwise(
        logits, targets, detseg::FocalLossOptions().alpha(c.alpha).gamma(c.gamma));
    EXPECT_TRUE(at::allclose(ours, get(d, std::string("ref_") + c.name), 1e-5, 1e-7));
    EXPECT_TRUE(at::allclose(ours, get(d, std::string("tv_") + c.name), 1e-5, 1e-7))
        << ours - get(d, std::string("tv_") + c.name);
  }
}

TEST(FocalLoss, GradientFiniteForLargeLogitsAndSmallGamma) {
  at::Tensor logits = at::tensor({-200.0f, 200.0f, -200.0f, 200.0f}).set_requires_grad(true);
  at::Tensor targets = at::tensor({1.0f, 1.0f, 0.0f, 0.0f});
  at::Tensor loss = detseg::focal_loss(logits, targets, at::scalar_tensor(1.0),
                                       detseg::FocalLossOptions().gamma(0.5));
  loss.backward();
  EXPECT_TRUE(std::isfinite(loss.item<float>()));
  EXPECT_TRUE(at::isfinite(logits.grad()).all().item<bool>());
  // A confident wrong positive (x = -200) costs alpha * 200 (modulator ~ 1).
  EXPECT_NEAR(loss.item<float>(), 0.25 * 200 + 0.75 * 200, 1e-2);
}

TEST(FocalLoss, DenseLabelsIgnoreAndOneHot) {
  at::Tensor logits = at::zeros({1, 3, 2});
  at::Tensor labels = at::tensor({0, -1, -2}, at::kLong).view({1, 3});
  const double pos = 0.25 * 0.25 * std::log(2.0), neg = 0.75 * 0.25 * std::log(2.0);
  at::Tensor loss = detseg::focal_loss_dense(logits, labels, at::scalar_tensor(1.0));
  // Anchor 0: class 0 positive, class 1 negative; anchor 1: two negatives; anchor 2 ignored.
  EXPECT_NEAR(loss.item<float>(), pos + 3 * neg, 1e-6);
}

TEST(FocalLoss, FusedCpuPathEqualsCompositeValuesAndGradients) {
  at::manual_seed(3);
  at::Tensor logits = (at::randn({2, 300, 5}) * 4).set_requires_grad(true);
  at::Tensor labels = at::randint(-2, 5, {2, 300}, at::kLong);
  const at::Tensor norm = at::scalar_tensor(7.0);
  for (double gamma : {2.0, 0.5}) {
    SCOPED_TRACE(gamma);
    const auto opts = detseg::FocalLossOptions().alpha(0.3).gamma(gamma);
    at::Tensor fused = detseg::focal_loss_dense(logits, labels, norm, opts);
    at::Tensor g_fused = torch::autograd::grad({fused}, {logits})[0];
    at::Tensor composite = detseg::focal_loss_dense_composite(logits, labels, norm, opts);
    at::Tensor g_composite = torch::autograd::grad({composite}, {logits})[0];
    EXPECT_NEAR(fused.item<float>(), composite.item<float>(), 1e-4 * composite.item<float>());
    EXPECT_TRUE(at::allclose(g_fused, g_composite, 1e-4, 1e-6)) << (g_fused - g_composite).abs().max();
  }
  // Ignored anchors get exactly zero gradient.
  at::Tensor g = torch::autograd::grad({detseg::focal_loss_dense(logits, labels, norm)}, {logits})[0];
  EXPECT_EQ(g.index({labels == -2}).abs().sum().item<float>(), 0.0f);
}

TEST(FocalLoss, BadInputsNameWhatArrived) {
  EXPECT_THROW(detseg::focal_loss_elementwise(at::zeros({2, 3}), at::zeros({3, 2})), c10::Error);
  EXPECT_THROW(detseg::focal_loss_dense(at::zeros({1, 3, 2}), at::tensor({0, 2, 0}, at::kLong).view({1, 3}),
                                        at::scalar_tensor(1.0)),
               c10::Error);
  // Empty input: zero loss, not NaN.
  at::Tensor empty = detseg::focal_loss_dense(at::zeros({0, 4}), at::zeros({0}, at::kLong),
                                              at::scalar_tensor(1.0));
  EXPECT_EQ(empty.item<float>(), 0.0f);
}

}  // namespace
