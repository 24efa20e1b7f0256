// ops/fast_paths.h: one switch set for the CPU fast paths (oneDNN blocked inference), read from
// the environment once and settable in-process; the fast path computes what plain ATen does (a
// whole RetinaNet at inference, to float rounding).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "detseg/models/retinanet_network.h"
#include "detseg/ops/fast_paths.h"

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

TEST(FastPaths, TheSwitchTurnsThePathOffAndOnAgain) {
  KeepFastPaths keep;
  at::NoGradGuard no_grad;
  const at::Tensor x = at::randn({1, 256, 32, 32});
  detseg::set_fast_paths({/*mkldnn_inference=*/true});
  EXPECT_EQ(detseg::mkldnn_inference_enabled(x, /*training=*/false), at::hasMKLDNN());
  EXPECT_FALSE(detseg::mkldnn_inference_enabled(x, /*training=*/true));
  EXPECT_FALSE(detseg::mkldnn_inference_enabled(x.to(at::kDouble), false));
  detseg::set_fast_paths({false});
  EXPECT_FALSE(detseg::mkldnn_inference_enabled(x, false));
}

TEST(FastPaths, RetinaNetComputesTheSameWithAndWithoutThem) {
  KeepFastPaths keep;
  // Frozen batch norm: the backbone folds it into oneDNN's packed weights at inference.
  detseg::RetinaNetNetwork net(detseg::RetinaNetNetworkOptions(3).depth(18).fpn_channels(128));
  net->eval();
  at::NoGradGuard no_grad;
  const at::Tensor images = at::randn({1, 3, 256, 320}, at::Generator(at::detail::createCPUGenerator(5)));
  detseg::set_fast_paths({true});
  const detseg::DenseOutputs fast = net->forward(images);
  detseg::set_fast_paths({false});
  const detseg::DenseOutputs plain = net->forward(images);
  EXPECT_LT(relative_difference(fast.cls_logits, plain.cls_logits), 1e-4);
  EXPECT_LT(relative_difference(fast.box_regression, plain.box_regression), 1e-4);
}
