// Tests: ResNet and EfficientNet backbones: torchvision parameter counts and names (fixture from
// tests/fixtures/make_model_fixtures.py), feature strides/shapes, frozen stages.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/models/backbones/efficientnet.h"
#include "detseg/models/backbones/resnet.h"
#include "detseg/models/layers/conv_bn_act.h"
#include "test_paths.h"

namespace {

nlohmann::json fixture() {
  return nlohmann::json::parse(detseg::read_file(std::string(DETSEG_SOURCE_DIR) + "/tests/fixtures/model_keys.json"));
}

int64_t count(torch::nn::Module& m, bool trainable_only = false) {
  int64_t n = 0;
  for (auto& p : m.parameters()) n += (!trainable_only || p.requires_grad()) ? p.numel() : 0;
  return n;
}

TEST(ResNet, ParameterCountsEqualTorchvision) {
  const auto counts = fixture()["resnet_params_without_fc"];
  for (int64_t depth : {18, 34, 50, 101}) {
    SCOPED_TRACE(depth);
    detseg::ResNet net(detseg::ResNetOptions(depth).frozen_bn(false).frozen_stages(0));
    EXPECT_EQ(count(*net), counts["resnet" + std::to_string(depth)].get<int64_t>());
  }
}

TEST(ResNet, FeatureShapesStridesAndFreezing) {
  detseg::ResNet net(detseg::ResNetOptions(18).returned_layers({2, 3, 4}).frozen_stages(2));
  const auto specs = net->feature_specs();
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[0].stride, 8);
  EXPECT_EQ(specs[2].stride, 32);
  EXPECT_EQ(specs[2].channels, 512);
  net->eval();
  at::NoGradGuard g;
  auto maps = net->forward(at::randn({1, 3, 65, 97}));
  ASSERT_EQ(maps.size(), 3u);
  EXPECT_EQ(maps[0].sizes(), (std::vector<int64_t>{1, 128, 9, 13}));
  EXPECT_EQ(maps[2].sizes(), (std::vector<int64_t>{1, 512, 3, 4}));
  // Frozen stem and layer1 (torchvision trainable_layers = 3): their convs do not train.
  EXPECT_FALSE(net->conv1->weight.requires_grad());
  EXPECT_FALSE(net->stages[0][0]->conv1->weight.requires_grad());
  EXPECT_TRUE(net->stages[1][0]->conv1->weight.requires_grad());
  EXPECT_THROW(detseg::ResNet(detseg::ResNetOptions(42)), detseg::ConfigError);
}

// Inference without autograd runs the body in oneDNN's blocked layout with folded, cached
// weights; with autograd on, the plain path. Both must agree, and the cache must follow any
// change of the weights or norm statistics.
TEST(ResNet, OneDnnInferencePathMatchesPlainPathAndTracksWeightChanges) {
  at::manual_seed(3);
  for (bool frozen : {true, false}) {
    SCOPED_TRACE(frozen);
    detseg::ResNet net(detseg::ResNetOptions(50).frozen_bn(frozen).frozen_stages(0));
    {
      at::NoGradGuard g;
      for (auto& b : net->named_buffers()) {
        if (b.key().find("running_var") != std::string::npos) b.value().uniform_(0.5, 2.0);
        if (b.key().find("running_mean") != std::string::npos) b.value().normal_(0, 0.1);
      }
    }
    net->eval();
    const at::Tensor x = at::randn({1, 3, 65, 97});
    auto compare = [&] {
      std::vector<at::Tensor> plain;
      {
        at::AutoGradMode on(true);  // autograd on: the plain path
        ASSERT_FALSE(detseg::mkldnn_inference_enabled(x, false));
        plain = net->forward(x);
      }
      at::NoGradGuard g;
      if (!detseg::mkldnn_inference_enabled(x, false)) GTEST_SKIP() << "LibTorch built without oneDNN";
      const auto blocked = net->forward(x);
      ASSERT_EQ(blocked.size(), plain.size());
      for (size_t i = 0; i < plain.size(); ++i) {
        EXPECT_FALSE(blocked[i].is_mkldnn());
        const double scale = plain[i].abs().max().item<double>();
        EXPECT_LT((blocked[i] - plain[i]).abs().max().item<double>(), 1e-4 * scale) << "level " << i;
      }
    };
    compare();
    {
      at::NoGradGuard g;
      net->stages[1][0]->conv2->weight.mul_(0.5);
      net->stages[2][1]->bn1->running_var.mul_(3.0);
    }
    compare();  // a stale cached weight would differ here
  }
}

TEST(EfficientNet, KeysAndShapesEqualTorchvisionB0) {
  const auto expected = fixture()["efficientnet_b0"];
  detseg::EfficientNet net(detseg::EfficientNetOptions(0).head_conv(true));
  std::map<std::string, std::vector<int64_t>> ours;
  for (auto& p : net->named_parameters()) ours[p.key()] = p.value().sizes().vec();
  for (auto& b : net->named_buffers()) ours[b.key()] = b.value().sizes().vec();
  EXPECT_EQ(ours.size(), expected.size());
  for (auto& [key, shape] : expected.items()) {
    auto it = ours.find(key);
    ASSERT_NE(it, ours.end()) << "missing " << key;
    EXPECT_EQ(it->second, shape.get<std::vector<int64_t>>()) << key;
  }
}

TEST(EfficientNet, DetectionFeatures) {
  detseg::EfficientNet net(detseg::EfficientNetOptions(0));
  const auto specs = net->feature_specs();
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[0].channels, 40);
  EXPECT_EQ(specs[1].channels, 112);
  EXPECT_EQ(specs[2].channels, 320);
  EXPECT_EQ(specs[2].stride, 32);
  net->eval();
  at::NoGradGuard g;
  auto maps = net->forward(at::randn({1, 3, 64, 96}));
  EXPECT_EQ(maps[0].sizes(), (std::vector<int64_t>{1, 40, 8, 12}));
  EXPECT_EQ(maps[2].sizes(), (std::vector<int64_t>{1, 320, 2, 3}));
  // B3's compound scaling: stem 40 channels, C5 384 channels.
  detseg::EfficientNet b3(detseg::EfficientNetOptions(3));
  EXPECT_EQ(b3->feature_specs()[2].channels, 384);
  EXPECT_EQ(b3->stem->options.out(), 40);
}

}  // namespace
