// Implements: tests of parameter selection (freeze, L2, multipliers), optimizer groups, the L2
// term and global-norm clipping, with hand-worked numbers.
#include <gtest/gtest.h>
#include <torch/optim.h>

#include "detseg/core/error.h"
#include "detseg/train/optimizer.h"
#include "tiny_modules.h"

namespace detseg {
namespace {

using testing::TinyNet;

std::vector<std::string> names(const ParameterSelection& s) {
  std::vector<std::string> out;
  for (const auto& p : s.trainable) out.push_back(p.name);
  return out;
}

TEST(Optimizer, L2SelectsWeightsWithAtLeastTwoDims) {
  TinyNet net;
  const auto sel = select_parameters(*net, OptimizerOptions{});
  std::vector<std::string> l2;
  for (const auto& p : sel.trainable)
    if (p.l2) l2.push_back(p.name);
  // bn.weight matches "weight" but is 1-D: a norm scale, not a kernel.
  EXPECT_EQ(l2, (std::vector<std::string>{"fc1.weight", "head.weight"}));
  EXPECT_TRUE(sel.frozen.empty());
}

TEST(Optimizer, L2LossIsHalfSumOfSquaresTimesDecay) {
  TinyNet net;
  testing::fill_tiny(*net);
  const auto sel = select_parameters(*net, OptimizerOptions{});
  // fc1.weight: 1+4+9+16 = 30, head.weight: 1+1 = 2; 0.1 x 32 / 2 = 1.6
  torch::Tensor loss = l2_regularization_loss(sel, 0.1);
  EXPECT_NEAR(loss.item<double>(), 1.6, 1e-6);
  loss.backward();
  // d/dw = decay x w
  EXPECT_TRUE(
      torch::allclose(net->fc1->weight.grad(), torch::tensor({{0.1f, 0.2f}, {0.3f, 0.4f}})));
  EXPECT_FALSE(net->fc1->bias.grad().defined());
  EXPECT_EQ(l2_regularization_loss(sel, 0.0).item<double>(), 0.0);
}

TEST(Optimizer, FreezeByPattern) {
  TinyNet net;
  OptimizerOptions o;
  o.freeze_pattern = R"(^fc1\.)";
  const auto sel = select_parameters(*net, o);
  EXPECT_EQ(sel.frozen, (std::vector<std::string>{"fc1.weight", "fc1.bias"}));
  EXPECT_EQ(names(sel),
            (std::vector<std::string>{"bn.weight", "bn.bias", "head.weight", "head.bias"}));
  EXPECT_FALSE(net->fc1->weight.requires_grad());
  EXPECT_TRUE(net->head->weight.requires_grad());
}

TEST(Optimizer, DeepLabMultipliersMultiply) {
  TinyNet net;
  OptimizerOptions o;
  o.multipliers = deeplab_gradient_multipliers({"head"}, 10.0);
  const auto sel = select_parameters(*net, o);
  std::vector<double> scales;
  for (const auto& p : sel.trainable) scales.push_back(p.lr_scale);
  // fc1.weight 1, fc1.bias 2 (bias), bn.weight 1, bn.bias 2, head.weight 10, head.bias 2 x 10
  EXPECT_EQ(scales, (std::vector<double>{1, 2, 1, 2, 10, 20}));
  TrainOptimizer opt = build_optimizer(sel, o, 0.1);
  EXPECT_EQ(opt.group_lr_scales, (std::vector<double>{1, 2, 10, 20}));
  ASSERT_EQ(opt.optimizer->param_groups().size(), 4u);
  EXPECT_EQ(opt.optimizer->param_groups()[0].params().size(), 2u);  // fc1.weight, bn.weight
  opt.set_learning_rate(0.5);
  std::vector<double> lrs;
  for (auto& g : opt.optimizer->param_groups()) lrs.push_back(g.options().get_lr());
  EXPECT_EQ(lrs, (std::vector<double>{0.5, 1.0, 5.0, 10.0}));
}

// Momentum SGD with a group rate x k equals SGD on gradients multiplied by k (the reference).
TEST(Optimizer, GroupScaleEqualsGradientMultiplierForMomentumSgd) {
  const auto f64 = torch::dtype(torch::kDouble);
  torch::Tensor a = torch::tensor({1.0, 2.0}, f64.requires_grad(true));
  torch::Tensor b = torch::tensor({1.0, 2.0}, f64.requires_grad(true));
  torch::optim::SGD scaled(
      {torch::optim::OptimizerParamGroup({a}, std::make_unique<torch::optim::SGDOptions>(
                                                  torch::optim::SGDOptions(0.2).momentum(0.9)))},
      torch::optim::SGDOptions(0.2).momentum(0.9));
  torch::optim::SGD plain({b}, torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 3; ++step) {
    scaled.zero_grad();
    plain.zero_grad();
    (a * torch::tensor({3.0, 4.0}, f64)).sum().backward();
    (b * torch::tensor({3.0, 4.0}, f64)).sum().backward();
    b.mutable_grad().mul_(2.0);  // the reference's gradient multiplier
    scaled.step();
    plain.step();
  }
  EXPECT_TRUE(torch::allclose(a, b, 1e-12, 1e-12)) << a << b;
  // First step by hand: 1 - 0.2 x 3 = 0.4; then momentum 0.9: buf 3 -> 5.7 -> 8.13.
  // a0 = 1 - 0.2 (3 + 5.7 + 8.13) = -2.366
  EXPECT_NEAR(a[0].item<double>(), -2.366, 1e-12);
}

TEST(Optimizer, SgdStepWithScaleByHand) {
  TinyNet net;
  testing::fill_tiny(*net);
  OptimizerOptions o;
  o.type = "sgd";
  o.multipliers = {{R"(^head\.bias$)", 3.0}};
  auto sel = select_parameters(*net, o);
  TrainOptimizer opt = build_optimizer(sel, o, 0.1);
  opt.optimizer->zero_grad();
  (net->head->bias * 2.0 + net->head->weight.sum()).sum().backward();
  opt.optimizer->step();
  EXPECT_NEAR(net->head->bias.item<double>(), 0.25 - 0.1 * 3 * 2, 1e-7);
  EXPECT_TRUE(torch::allclose(net->head->weight, torch::tensor({{0.9f, -1.1f}})));
}

TEST(Optimizer, AdamAdamWRmsPropBuildAndStep) {
  for (const char* type : {"adam", "adamw", "rmsprop", "momentum"}) {
    TinyNet net;
    testing::fill_tiny(*net);
    OptimizerOptions o;
    o.type = type;
    auto sel = select_parameters(*net, o);
    TrainOptimizer opt = build_optimizer(sel, o, 0.1);
    opt.optimizer->zero_grad();
    net->forward(torch::tensor({{1.f, 2.f}, {3.f, -1.f}, {0.5f, 0.5f}, {-1.f, 2.f}}))
        .sum()
        .backward();
    opt.optimizer->step();
    EXPECT_FALSE(torch::equal(net->head->weight, torch::tensor({{1.f, -1.f}}))) << type;
  }
  // AdamW with a zero gradient only decays: w (1 - lr x wd).
  torch::Tensor w = torch::tensor({2.0}, torch::dtype(torch::kDouble).requires_grad(true));
  torch::optim::AdamW adamw({w}, torch::optim::AdamWOptions(0.1).weight_decay(0.01));
  w.mutable_grad() = torch::zeros({1}, torch::kDouble);
  adamw.step();
  EXPECT_NEAR(w.item<double>(), 2.0 * (1 - 0.1 * 0.01), 1e-12);
}

// The training loop's step changes each updated parameter's version, as an in-place op would: ATen's
// fused kernels alone do not, and packed inference weights (ops/packed_conv.h) are keyed on it, so
// a periodic evaluation after the first scored stale weights (eval-30.json AP 0.005 where `detseg
// eval` of ckpt-30 gave 0.042).
TEST(Optimizer, EveryTypeStepBumpsTheParametersVersions) {
  for (const char* type : {"sgd", "momentum", "adam", "adamw", "rmsprop"}) {
    TinyNet net;
    testing::fill_tiny(*net);
    OptimizerOptions o;
    o.type = type;
    TrainOptimizer opt = build_optimizer(select_parameters(*net, o), o, 0.1);
    opt.optimizer->zero_grad();
    net->forward(torch::tensor({{1.f, 2.f}, {3.f, -1.f}})).sum().backward();
    const uint32_t before = net->head->weight._version();
    const torch::Tensor old = net->head->weight.detach().clone();
    opt.step(torch::zeros({}));
    EXPECT_FALSE(torch::equal(net->head->weight, old)) << type;
    EXPECT_GT(net->head->weight._version(), before) << type;
  }
}

// Two steps of each optimizer type as build_optimizer configures it, on head only (fc1 and bn
// frozen) with the constant gradients d/dbias = 2, d/dweight = [1, 1], worked by hand from
// torch's update rules (lr 0.1).
TEST(Optimizer, EveryTypeStepsByHand) {
  struct Case {
    const char* type;
    bool nesterov;
    double adamw_decay;
    float bias1, bias2;   // head.bias after step 1 and 2 (starts at 0.25)
    float weight0_1;      // head.weight[0] after step 1 (starts at 1)
  };
  const double r = 1 / std::sqrt(0.1);  // rmsprop: 1 / sqrt((1 - alpha) g^2) per unit gradient
  const Case cases[] = {
      // sgd ignores momentum: two plain steps of 0.1 x 2.
      {"sgd", false, 0, 0.05f, -0.15f, 0.9f},
      // momentum 0.9: buf = g, then 1.9 g.
      {"momentum", false, 0, 0.05f, 0.05f - 0.1f * 1.9f * 2, 0.9f},
      // Nesterov: step g + 0.9 buf = 1.9 g, then g + 0.9 (1.9 g) = 2.71 g.
      {"momentum", true, 0, 0.25f - 0.1f * 1.9f * 2, 0.25f - 0.38f - 0.1f * 2.71f * 2, 1 - 0.19f},
      // Adam: bias-corrected m / sqrt(v) = sign(g) while the gradient is constant.
      {"adam", false, 0, 0.15f, 0.05f, 0.9f},
      // AdamW with decay 0.5: w (1 - 0.1 x 0.5) first, then the Adam step.
      {"adamw", false, 0.5, 0.25f * 0.95f - 0.1f, (0.25f * 0.95f - 0.1f) * 0.95f - 0.1f, 0.95f - 0.1f},
      // RMSprop (alpha 0.9, momentum 0.9): buf = g / sqrt(0.1 g^2); then square_avg = 0.19 g^2 and
      // buf = 0.9 buf + g / sqrt(0.19 g^2).
      {"rmsprop", false, 0, static_cast<float>(0.25 - 0.1 * r),
       static_cast<float>(0.25 - 0.1 * r - 0.1 * (0.9 * r + 1 / std::sqrt(0.19))),
       static_cast<float>(1 - 0.1 * r)},
  };
  // Both ways of stepping: torch::optim's own, and the training loop's (TrainOptimizer::step, with
  // the device-side skip flag at 0).
  for (const bool guarded : {false, true})
  for (const Case& c : cases) {
    TinyNet net;
    testing::fill_tiny(*net);
    OptimizerOptions o;
    o.type = c.type;
    o.nesterov = c.nesterov;
    o.adamw_weight_decay = c.adamw_decay;
    o.freeze_pattern = "^(fc1|bn)\\.";
    TrainOptimizer opt = build_optimizer(select_parameters(*net, o), o, 0.1);
    const std::string what = std::string(c.type) + (c.nesterov ? " nesterov" : "") + (guarded ? " guarded" : "");
    for (int step = 0; step < 2; ++step) {
      opt.optimizer->zero_grad();
      (net->head->bias * 2.0 + net->head->weight.sum()).sum().backward();
      if (guarded)
        opt.step(torch::zeros({}));
      else
        opt.optimizer->step();
      if (step == 0) {
        EXPECT_NEAR(net->head->bias.item<float>(), c.bias1, 1e-6) << what;
        EXPECT_NEAR(net->head->weight[0][0].item<float>(), c.weight0_1, 1e-6) << what;
      }
    }
    EXPECT_NEAR(net->head->bias.item<float>(), c.bias2, 1e-6) << what;
  }
}

// The training loop's step against torch::optim's on a channels-last convolution weight whose
// gradient arrives contiguous or channels-last (the fused kernels walk raw memory, so strides must
// be matched; they see the weight's memory through a contiguous permuted view),
// then a step with NaN gradients and the skip flag set: parameters, state and step counts stay
// bit for bit, and the steps after it go on as if the skipped one had never come.
TEST(Optimizer, GuardedStepMatchesTorchAndSkipsOnTheDevice) {
  for (const char* type : {"sgd", "momentum", "adam", "adamw", "rmsprop"}) {
    torch::manual_seed(3);
    const torch::Tensor start = torch::randn({4, 3, 3, 3});
    std::vector<torch::Tensor> grads;
    for (int i = 0; i < 4; ++i) grads.push_back(torch::randn({4, 3, 3, 3}));
    OptimizerOptions o;
    o.type = type;
    o.adamw_weight_decay = 0.1;
    o.nesterov = std::string(type) == "momentum";
    auto make = [&](torch::Tensor& w) {
      w = start.clone().contiguous(torch::MemoryFormat::ChannelsLast).requires_grad_(true);
      ParameterSelection sel;
      sel.trainable.push_back({"w", w});
      return build_optimizer(sel, o, 0.05);
    };
    torch::Tensor reference_w, w;
    TrainOptimizer reference = make(reference_w), guarded = make(w);
    const std::string what = type;
    for (int i = 0; i < 4; ++i) {
      reference_w.mutable_grad() = grads[i].clone();
      reference.optimizer->step();
      if (i == 2) {  // a NaN step in between, skipped on the device
        const torch::Tensor before = w.detach().clone();
        w.mutable_grad() = torch::full({4, 3, 3, 3}, std::nan(""));
        guarded.step(torch::ones({}));
        EXPECT_TRUE(torch::equal(w, before)) << what;
        if (!guarded.device_steps.empty()) {
          EXPECT_EQ(guarded.device_steps[0].item<float>(), 2.0f) << what;
        }
      }
      // Contiguous on even steps, channels-last (as a conv's backward gives it) on odd ones.
      w.mutable_grad() = i % 2 ? grads[i].contiguous(torch::MemoryFormat::ChannelsLast) : grads[i].clone();
      guarded.step(torch::zeros({}));
      const double tolerance = std::string(type) == "rmsprop" ? 0 : 1e-6;
      EXPECT_LE((w - reference_w).abs().max().item<double>(), tolerance) << what << " step " << i;
    }
    guarded.sync_state();
    if (o.type == "sgd" || o.type == "momentum") continue;  // no step count in their state
    auto& state = *guarded.optimizer->state().at(w.unsafeGetTensorImpl());
    int64_t steps = -1;
    if (o.type == "adam") steps = static_cast<torch::optim::AdamParamState&>(state).step();
    if (o.type == "adamw") steps = static_cast<torch::optim::AdamWParamState&>(state).step();
    if (o.type == "rmsprop") steps = static_cast<torch::optim::RMSpropParamState&>(state).step();
    EXPECT_EQ(steps, 4) << what;
  }
}

TEST(Optimizer, BadConfigIsConfigError) {
  TinyNet net;
  OptimizerOptions o;
  o.type = "lamb";
  auto sel = select_parameters(*net, o);
  EXPECT_THROW(build_optimizer(sel, o, 0.1), ConfigError);
  o = OptimizerOptions{};
  o.l2_pattern = "(unclosed";
  EXPECT_THROW(select_parameters(*net, o), ConfigError);
  o = OptimizerOptions{};
  o.freeze_pattern = ".*";
  EXPECT_THROW(build_optimizer(select_parameters(*net, o), o, 0.1), Error);
}

TEST(Optimizer, ClipByGlobalNorm) {
  torch::Tensor a = torch::zeros({2}, torch::requires_grad());
  torch::Tensor b = torch::zeros({1}, torch::requires_grad());
  torch::Tensor no_grad = torch::zeros({3}, torch::requires_grad());
  auto set = [&] {
    a.mutable_grad() = torch::tensor({3.f, 4.f});
    b.mutable_grad() = torch::tensor({12.f});
  };
  set();
  // sqrt(9 + 16 + 144) = 13
  EXPECT_DOUBLE_EQ(clip_gradients_by_global_norm({a, b, no_grad}, 6.5), 13.0);
  EXPECT_TRUE(torch::allclose(a.grad(), torch::tensor({1.5f, 2.f})));
  EXPECT_TRUE(torch::allclose(b.grad(), torch::tensor({6.f})));
  set();
  EXPECT_DOUBLE_EQ(clip_gradients_by_global_norm({a, b}, 20.0), 13.0);  // under the cap
  EXPECT_TRUE(torch::equal(b.grad(), torch::tensor({12.f})));
  EXPECT_DOUBLE_EQ(clip_gradients_by_global_norm({a, b}, 0.0), 13.0);  // norm only
  EXPECT_TRUE(torch::equal(b.grad(), torch::tensor({12.f})));
  b.mutable_grad() = torch::tensor({NAN});
  EXPECT_TRUE(std::isnan(clip_gradients_by_global_norm({a, b}, 1.0)));
  EXPECT_TRUE(torch::equal(a.grad(), torch::tensor({3.f, 4.f})));  // left as is
  EXPECT_DOUBLE_EQ(clip_gradients_by_global_norm({no_grad}, 1.0), 0.0);
}

TEST(Optimizer, LossDividedByReplicas) {
  EXPECT_DOUBLE_EQ(normalize_loss_for_replicas(torch::tensor(8.0), 4).item<double>(), 2.0);
  EXPECT_DOUBLE_EQ(normalize_loss_for_replicas(torch::tensor(8.0), 1).item<double>(), 8.0);
}

}  // namespace
}  // namespace detseg
