// Tests: ResNet and EfficientNet backbones: torchvision parameter counts and names (fixture from
// tests/fixtures/make_model_fixtures.py), feature strides/shapes, frozen stages.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/models/backbones/efficientnet.h"
#include "detseg/models/backbones/resnet.h"

namespace {

nlohmann::json fixture() {
  return nlohmann::json::parse(detseg::read_file(DETSEG_SOURCE_DIR "/tests/fixtures/model_keys.json"));
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
