// Tests: EfficientDet networks: parameter counts against the paper (D0 3.9M, D1 6.6M), output
// shapes in torchvision's anchor order, BiFPN fusion weights.
#include <gtest/gtest.h>

#include "detseg/core/error.h"
#include "detseg/config/config.h"
#include "detseg/models/build.h"
#include "detseg/models/efficientdet_network.h"
#include "detseg/models/layers/frozen_batch_norm.h"
#include "detseg/models/necks/bifpn.h"

namespace {

int64_t count(torch::nn::Module& m) {
  int64_t n = 0;
  for (auto& p : m.parameters()) n += p.numel();
  return n;
}

TEST(EfficientDet, ParameterCountsNearPaper) {
  // Paper Table 2 (COCO, 90 classes, 9 anchors): D0 3.9M, D1 6.6M; within 3%.
  detseg::EfficientDetNetwork d0(detseg::EfficientDetNetworkOptions(0, 90));
  detseg::EfficientDetNetwork d1(detseg::EfficientDetNetworkOptions(1, 90));
  const int64_t n0 = count(*d0), n1 = count(*d1);
  EXPECT_NEAR(n0 / 1e6, 3.9, 0.03 * 3.9) << n0;
  EXPECT_NEAR(n1 / 1e6, 6.6, 0.03 * 6.6) << n1;
  EXPECT_EQ(d0->scaling.image_size, 512);
  EXPECT_EQ(detseg::efficientdet_scaling(7).image_size, 1536);
  EXPECT_THROW(detseg::efficientdet_scaling(8), detseg::ConfigError);
}

TEST(EfficientDet, OutputsPerLevelInAnchorOrder) {
  detseg::EfficientDetNetwork net(detseg::EfficientDetNetworkOptions(0, 3));
  net->eval();
  at::NoGradGuard g;
  auto out = net->forward(at::randn({1, 3, 96, 160}));
  // P3..P7 of 96x160: 12x20, 6x10, 3x5, 2x3, 1x2 cells, 9 anchors each.
  const int64_t cells = 12 * 20 + 6 * 10 + 3 * 5 + 2 * 3 + 1 * 2;
  EXPECT_EQ(out.cls_logits.sizes(), (std::vector<int64_t>{1, cells * 9, 3}));
  EXPECT_EQ(out.box_regression.sizes(), (std::vector<int64_t>{1, cells * 9, 4}));
  ASSERT_EQ(out.level_sizes.size(), 5u);
  EXPECT_EQ(out.level_sizes[4], (std::array<int64_t, 2>{1, 2}));
  EXPECT_EQ(out.strides, (std::vector<int64_t>{8, 16, 32, 64, 128}));
  // Class bias from the prior 0.01 with near-zero weights: logits near -log(99).
  EXPECT_NEAR(out.cls_logits.mean().item<float>(), -std::log(99.0), 0.5);
}

TEST(EfficientDet, TrainStepChangesFusionWeights) {
  detseg::EfficientDetNetwork net(detseg::EfficientDetNetworkOptions(0, 2));
  net->train();
  auto out = net->forward(at::randn({1, 3, 64, 64}));
  (out.cls_logits.sigmoid().sum() + out.box_regression.pow(2).sum()).backward();
  const auto bifpn = std::dynamic_pointer_cast<detseg::BiFpnImpl>(net->fpn);  // the default neck
  ASSERT_TRUE(bifpn);
  const at::Tensor& w = bifpn->cells[0]->nodes[4]->weights;  // P4 out: 3 inputs
  ASSERT_EQ(w.numel(), 3);
  ASSERT_TRUE(w.grad().defined());
  EXPECT_GT(w.grad().abs().sum().item<float>(), 0.0f);
}

}  // namespace

namespace {

// The stem's first batch norm after one training-mode forward of a D0 built (seeded) with
// model.batch_norm_momentum = `momentum`; every norm must carry that momentum.
at::Tensor running_mean_after_one_batch(double momentum) {
  const detseg::PipelineConfig config = detseg::parse_config(
      "model: {type: efficientdet, efficientdet: d0, num_classes: 3, image_size: 128, batch_norm_momentum: " +
          std::to_string(momentum) + "}\n",
      "bn.yaml");
  torch::manual_seed(0);
  auto model = detseg::build_detector(config);
  std::vector<detseg::Norm2dImpl*> norms;
  for (auto& m : model->modules())
    if (auto* n = dynamic_cast<detseg::Norm2dImpl*>(m.get())) norms.push_back(n);
  EXPECT_GT(norms.size(), 50u);
  for (auto* n : norms) EXPECT_DOUBLE_EQ(n->options.momentum(), momentum);
  EXPECT_EQ(norms[0]->running_mean.abs().max().item<float>(), 0.0f);
  model->train();
  at::NoGradGuard no_grad;
  model->network_outputs(at::linspace(-1, 1, 2 * 3 * 128 * 128).reshape({2, 3, 128, 128}));
  return norms[0]->running_mean.clone();
}

TEST(EfficientDet, BatchNormMomentumComesFromTheConfig) {
  // From zero, a running mean moves by momentum x the batch mean: the same weights and batch
  // give updates in the ratio of the momenta.
  const at::Tensor slow = running_mean_after_one_batch(0.01), fast = running_mean_after_one_batch(0.1);
  ASSERT_GT(slow.abs().max().item<float>(), 0.0f);
  EXPECT_TRUE(at::allclose(fast, slow * 10, 1e-4, 1e-7));
}

}  // namespace
