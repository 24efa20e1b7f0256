// Implements: tests of the Winograd F(2x2, 3x3) and F(4x4, 3x3) convolutions: a hand-worked value,
// forward and all three gradients against at::conv2d (even, odd and tiny maps, dilations, several
// inputs in one call), frozen inputs, and the shapes winograd_applies accepts. conv2d_fast's
// dilated shortcuts are in test_conv2d_fast.cpp.
#include <torch/csrc/autograd/autograd.h>

#include <array>

#include "detseg/ops/conv2d_fast.h"
#include "detseg/ops/winograd_conv.h"
#include "ops/ops_test_util.h"

using namespace detseg;
using namespace detseg::testing;


TEST(WinogradConv, HandWorkedSumsOfNeighbours) {
  // An all-ones kernel sums each 3x3 neighbourhood: on 0..8 laid out 3x3 the centre sees all nine
  // (36), the top-left corner 0 + 1 + 3 + 4 = 8, the bottom-right 4 + 5 + 7 + 8 = 24; bias 0.5.
  const at::Tensor x = at::arange(9, at::kFloat).view({1, 1, 3, 3});
  const at::Tensor y = winograd_conv3x3(x, at::ones({1, 1, 3, 3}), at::full({1}, 0.5f));
  expect_close(y, F({8.5f, 15.5f, 12.5f, 21.5f, 36.5f, 27.5f, 20.5f, 33.5f, 24.5f}, {1, 1, 3, 3}));
}

TEST(WinogradConv, ForwardAndGradientsMatchDirectConvolution) {
  at::manual_seed(3);
  // Even, odd and 1x1 maps; channels in != out.
  for (int64_t tile : {2, 4})
    for (auto hw : std::vector<std::pair<int64_t, int64_t>>{{8, 8}, {7, 5}, {1, 1}, {2, 3}, {13, 10}, {6, 9}, {48, 45}}) {  // 48 x 45: several chunks
      const at::Tensor x = at::randn({2, 16, hw.first, hw.second}).requires_grad_(true);
      const at::Tensor w = (0.1 * at::randn({24, 16, 3, 3})).requires_grad_(true);
      const at::Tensor b = at::randn({24}).requires_grad_(true);
      const at::Tensor ours = winograd_conv3x3(x, w, b, 1, tile);
      const at::Tensor want = at::conv2d(x, w, b, 1, 1);
      ASSERT_EQ(ours.sizes(), want.sizes());
      EXPECT_LT(relative_error(ours, want), 1e-5) << "F(" << tile << ") " << hw.first << "x" << hw.second;

      const at::Tensor r = at::randn(want.sizes());
      const auto g_ours = torch::autograd::grad({(ours * r).sum()}, {x, w, b});
      const auto g_want = torch::autograd::grad({(want * r).sum()}, {x, w, b});
      for (int i = 0; i < 3; ++i)
        EXPECT_LT(relative_error(g_ours[i], g_want[i]), 1e-5) << "F(" << tile << ") grad " << i << " " << hw.first;
    }
}

TEST(WinogradConv, DilatedConvolutionAndGradientsMatchDirectConvolution) {
  at::manual_seed(6);
  // (dilation, H, W): sub-grids of equal and unequal sizes, and a dilation beyond the map.
  for (int64_t tile : {2, 4})
    for (auto [d, h, w] : std::vector<std::array<int64_t, 3>>{{2, 9, 8}, {3, 7, 13}, {4, 16, 16}, {5, 3, 4}}) {
      const at::Tensor x = at::randn({2, 16, h, w}).requires_grad_(true);
      const at::Tensor wt = (0.1 * at::randn({8, 16, 3, 3})).requires_grad_(true);
      const at::Tensor b = at::randn({8}).requires_grad_(true);
      const at::Tensor ours = winograd_conv3x3(x, wt, b, d, tile);
      const at::Tensor want = at::conv2d(x, wt, b, 1, d, d);
      ASSERT_EQ(ours.sizes(), want.sizes());
      EXPECT_LT(relative_error(ours, want), 1e-5) << "F(" << tile << ") d " << d;
      const at::Tensor r = at::randn(want.sizes());
      const auto g_ours = torch::autograd::grad({(ours * r).sum()}, {x, wt, b});
      const auto g_want = torch::autograd::grad({(want * r).sum()}, {x, wt, b});
      for (int i = 0; i < 3; ++i)
        EXPECT_LT(relative_error(g_ours[i], g_want[i]), 1e-5) << "F(" << tile << ") d " << d << " grad " << i;
    }
}

TEST(WinogradConv, SeveralInputsShareOneCallAndGetTheirOwnGradients) {
  at::manual_seed(4);
  const at::Tensor w = (0.1 * at::randn({32, 16, 3, 3})).requires_grad_(true);
  std::vector<at::Tensor> xs = {at::randn({2, 16, 10, 10}), at::randn({2, 16, 5, 5}), at::randn({2, 16, 3, 3}),
                               at::randn({4, 16, 24, 24}), at::randn({4, 16, 12, 11})};  // the last two: several chunks
  for (auto& x : xs) x.requires_grad_(true);
  const auto ys = winograd_conv3x3(xs, w, c10::nullopt);  // no bias
  ASSERT_EQ(ys.size(), xs.size());
  at::Tensor loss_ours = at::zeros({}), loss_want = at::zeros({});
  for (size_t l = 0; l < xs.size(); ++l) {
    const at::Tensor want = at::conv2d(xs[l], w, {}, 1, 1);
    EXPECT_LT(relative_error(ys[l], want), 1e-5) << "level " << l;
    const at::Tensor r = at::randn(want.sizes());
    loss_ours = loss_ours + (ys[l] * r).sum();
    loss_want = loss_want + (want * r).sum();
  }
  std::vector<at::Tensor> inputs = xs;
  inputs.push_back(w);
  const auto g_ours = torch::autograd::grad({loss_ours}, inputs);
  const auto g_want = torch::autograd::grad({loss_want}, inputs);
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_LT(relative_error(g_ours[i], g_want[i]), 1e-5) << "input " << i;
}

TEST(WinogradConv, FrozenInputGetsNoGradientAndWeightStillLearns) {
  at::manual_seed(5);
  const at::Tensor x = at::randn({1, 16, 6, 6});  // e.g. the output of frozen layers
  const at::Tensor w = (0.1 * at::randn({16, 16, 3, 3})).requires_grad_(true);
  const at::Tensor y = winograd_conv3x3(x, w, c10::nullopt);
  y.sum().backward();
  EXPECT_FALSE(x.grad().defined());
  const at::Tensor w2 = w.detach().clone().requires_grad_(true);
  at::conv2d(x, w2, {}, 1, 1).sum().backward();
  EXPECT_LT(relative_error(w.grad(), w2.grad()), 1e-5);
}

TEST(WinogradConv, AppliesOnlyToStrideOnePaddingOneThreeByThree) {
  const at::Tensor x = at::randn({11, 128, 10, 10});  // 11 x 5 x 5 = 275 tiles
  const at::Tensor w = at::randn({128, 128, 3, 3});
  EXPECT_TRUE(winograd_applies(x, w, {1, 1}, {1, 1}, {1, 1}, 1));
  EXPECT_FALSE(winograd_applies(x, w, {2, 2}, {1, 1}, {1, 1}, 1));                  // strided
  EXPECT_FALSE(winograd_applies(x, w, {1, 1}, {2, 2}, {2, 2}, 1));                  // atrous: no gain measured
  EXPECT_FALSE(winograd_applies(x, w, {1, 1}, {0, 0}, {1, 1}, 1));                  // another padding
  EXPECT_FALSE(winograd_applies(x, w.slice(1, 0, 32), {1, 1}, {1, 1}, {1, 1}, 4));  // grouped
  EXPECT_FALSE(winograd_applies(x, at::randn({128, 128, 1, 1}), {1, 1}, {0, 0}, {1, 1}, 1));  // 1x1
  EXPECT_FALSE(winograd_applies(x.to(at::kDouble), w.to(at::kDouble), {1, 1}, {1, 1}, {1, 1}, 1));
  EXPECT_FALSE(winograd_applies(x.slice(1, 0, 64), w.slice(1, 0, 64), {1, 1}, {1, 1}, {1, 1}, 1));  // thin
  EXPECT_FALSE(winograd_applies(x, w.slice(0, 0, 64), {1, 1}, {1, 1}, {1, 1}, 1));                  // thin output
  EXPECT_FALSE(winograd_applies(x.slice(0, 0, 10), w, {1, 1}, {1, 1}, {1, 1}, 1));  // 250 tiles: too few
  // conv2d_fast no longer takes Winograd for a single map: its values are conv2d's to rounding.
  EXPECT_LT(relative_error(conv2d_fast(x, w, c10::nullopt, {1, 1}, {1, 1}, {1, 1}, 1), at::conv2d(x, w, {}, 1, 1)),
            1e-6);
  EXPECT_LT(relative_error(conv2d_fast(x, w, c10::nullopt, {2, 2}, {1, 1}, {1, 1}, 1), at::conv2d(x, w, {}, 2, 1)),
            1e-6);
}

TEST(WinogradConv, RejectsWrongShapes) {
  EXPECT_THROW(winograd_conv3x3(at::randn({1, 8, 4, 4}), at::randn({4, 16, 3, 3}), c10::nullopt), c10::Error);
  EXPECT_THROW(winograd_conv3x3(at::randn({1, 16, 4, 4}), at::randn({4, 16, 5, 5}), c10::nullopt), c10::Error);
  EXPECT_THROW(winograd_conv3x3(at::randn({1, 16, 4, 4}), at::randn({4, 16, 3, 3}), at::randn({5})), c10::Error);
  EXPECT_THROW(winograd_conv3x3(at::randn({1, 16, 4, 4}), at::randn({4, 16, 3, 3}), c10::nullopt, 1, 3), c10::Error);
}
