// ops/fast_paths.h: one switch set for the CPU fast paths (Winograd, oneDNN blocked inference),
// read from the environment once and settable in-process; each path computes what the plain
// ATen path does (a whole RetinaNet, inference and a training step's loss inputs, to float rounding).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "detseg/models/retinanet_network.h"
#include "detseg/ops/fast_paths.h"
#include "detseg/ops/winograd_conv.h"

namespace {

// Restores the process's switches when a test ends.
struct KeepFastPaths {
  detseg::FastPathOptions saved = detseg::fast_paths();
  ~KeepFastPaths() { detseg::set_fast_paths(saved); }
};

float relative_difference(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max().clamp_min(1.0)).item<float>();
}

}  // namespace

TEST(FastPaths, EachSwitchTurnsItsPathOffAndOnAgain) {
  KeepFastPaths keep;
  at::NoGradGuard no_grad;
  const at::Tensor x = at::randn({1, 256, 32, 32});  // 16 x 16 tiles: enough for Winograd
  const at::Tensor w = at::randn({256, 256, 3, 3});
  auto winograd = [&] { return detseg::winograd_applies(x, w, {1, 1}, {1, 1}, {1, 1}, 1); };
  detseg::set_fast_paths({/*winograd=*/true, /*mkldnn_inference=*/true});
  EXPECT_TRUE(winograd());
  EXPECT_EQ(detseg::mkldnn_inference_enabled(x, /*training=*/false), at::hasMKLDNN());
  EXPECT_FALSE(detseg::mkldnn_inference_enabled(x, /*training=*/true));
  detseg::set_fast_paths({false, true});
  EXPECT_FALSE(winograd());
  detseg::set_fast_paths({true, false});
  EXPECT_TRUE(winograd());
  EXPECT_FALSE(detseg::mkldnn_inference_enabled(x, false));
}

TEST(FastPaths, RetinaNetComputesTheSameWithAndWithoutThem) {
  KeepFastPaths keep;
  // 128 FPN channels: the subnets' 3x3 convs are wide enough for Winograd; frozen batch norm: the
  // backbone folds it into oneDNN's packed weights at inference.
  detseg::RetinaNetNetwork net(detseg::RetinaNetNetworkOptions(3).depth(18).fpn_channels(128));
  net->eval();
  at::NoGradGuard no_grad;
  const at::Tensor images = at::randn({1, 3, 256, 320}, at::Generator(at::detail::createCPUGenerator(5)));
  detseg::set_fast_paths({true, true});
  const detseg::DenseOutputs fast = net->forward(images);
  detseg::set_fast_paths({false, false});
  const detseg::DenseOutputs plain = net->forward(images);
  EXPECT_LT(relative_difference(fast.cls_logits, plain.cls_logits), 1e-4);
  EXPECT_LT(relative_difference(fast.box_regression, plain.box_regression), 1e-4);
  // And the training path (Winograd only: oneDNN's blocked layout has no backward).
  net->train();
  at::GradMode::set_enabled(true);
  detseg::set_fast_paths({true, false});
  const at::Tensor with = net->forward(images).cls_logits;
  detseg::set_fast_paths({false, false});
  const at::Tensor without = net->forward(images).cls_logits;
  EXPECT_LT(relative_difference(with.detach(), without.detach()), 1e-4);
}
