// Implements: tests of the weight EMA: the decay rule, hand-worked updates, tracked tensors,
// swapping in and out.
#include <gtest/gtest.h>

#include "detseg/core/error.h"
#include "detseg/train/ema.h"
#include "tiny_modules.h"

namespace detseg {
namespace {

using testing::TinyNet;

TEST(Ema, DecayRule) {
  EmaOptions o;                                 // 0.9998
  EXPECT_DOUBLE_EQ(ema_decay_at(o, 0), 0.1);    // (1 + 0) / (10 + 0)
  EXPECT_DOUBLE_EQ(ema_decay_at(o, 10), 0.55);  // 11 / 20
  EXPECT_DOUBLE_EQ(ema_decay_at(o, 1000000), 0.9998);
  // The switch-over: (1 + n) / (10 + n) >= 0.9998 from n = 44990 on (exactly equal there).
  EXPECT_LT(ema_decay_at(o, 44989), 0.9998);
  EXPECT_DOUBLE_EQ(ema_decay_at(o, 44991), 0.9998);
  o.use_num_updates = false;
  EXPECT_DOUBLE_EQ(ema_decay_at(o, 0), 0.9998);
}

TEST(Ema, TracksParametersAndFloatBuffers) {
  TinyNet net;
  std::vector<std::string> names;
  for (const auto& kv : ema_tracked_tensors(*net)) names.push_back(kv.first);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "bn.weight", "bn.bias",
                                             "head.weight", "head.bias", "bn.running_mean",
                                             "bn.running_var"}));  // not num_batches_tracked
}

TEST(Ema, UpdateByHand) {
  TinyNet net;
  testing::fill_tiny(*net);  // head.bias = 0.25
  WeightEma ema(*net, EmaOptions{});
  {
    torch::NoGradGuard g;
    net->head->bias.fill_(2.25);
  }
  // decay 0.1: 0.25 - 0.9 (0.25 - 2.25) = 2.05
  EXPECT_DOUBLE_EQ(ema.update(*net, 0), 0.1);
  {
    torch::NoGradGuard g;
    net->head->bias.fill_(3.05);
  }
  // decay 0.55: 2.05 - 0.45 (2.05 - 3.05) = 2.5
  EXPECT_DOUBLE_EQ(ema.update(*net, 10), 0.55);
  const auto& shadow = ema.shadow();
  EXPECT_EQ(shadow[5].first, "head.bias");
  EXPECT_NEAR(shadow[5].second.item<double>(), 2.5, 1e-6);
  // Unchanged weights keep their average.
  EXPECT_TRUE(torch::allclose(shadow[0].second, torch::tensor({{1.f, 2.f}, {3.f, 4.f}})));
}

TEST(Ema, SwapInAndOut) {
  TinyNet net;
  testing::fill_tiny(*net);
  WeightEma ema(*net, EmaOptions{});
  {
    torch::NoGradGuard g;
    net->head->bias.fill_(1.25);
  }
  ema.update(*net, 0);  // average 0.25 - 0.9 (0.25 - 1.25) = 1.15
  {
    EmaScope scope(&ema, *net);
    EXPECT_TRUE(ema.swapped());
    EXPECT_NEAR(net->head->bias.item<double>(), 1.15, 1e-6);
    EXPECT_THROW(ema.update(*net, 1), Error);  // no averaging of averages
  }
  EXPECT_FALSE(ema.swapped());
  EXPECT_NEAR(net->head->bias.item<double>(), 1.25, 1e-6);
  EXPECT_NEAR(ema.shadow()[5].second.item<double>(), 1.15, 1e-6);
  EmaScope off(nullptr, *net);  // EMA disabled: no-op
  EXPECT_NEAR(net->head->bias.item<double>(), 1.25, 1e-6);
}

TEST(Ema, LoadChecksNamesAndShapes) {
  TinyNet net;
  WeightEma ema(*net, EmaOptions{});
  NamedTensors state = ema.shadow();
  for (auto& kv : state) kv.second = torch::full_like(kv.second, 7.0);
  ema.load(state);
  EXPECT_EQ(ema.shadow()[0].second[0][0].item<float>(), 7.f);
  state[1].second = torch::zeros({5});
  EXPECT_THROW(ema.load(state), Error);
  state.pop_back();
  EXPECT_THROW(ema.load(state), Error);
  EXPECT_THROW(WeightEma(*net, EmaOptions{1.5, true}), ConfigError);
}

}  // namespace
}  // namespace detseg
