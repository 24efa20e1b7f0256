// Implements: tests of conv2d_fast's exact shortcuts for dilated 3x3 convs (ops/conv2d_fast.h): the
// centre tap alone when the rate covers the map, nine 1x1 convs over the in-map pixels when the taps
// read mostly padding; values and gradients against at::conv2d.
#include <torch/csrc/autograd/autograd.h>

#include <utility>
#include <vector>

#include "detseg/ops/conv2d_fast.h"
#include "ops/ops_test_util.h"

using namespace detseg;
using namespace detseg::testing;

TEST(Conv2dFast, CentreTapStandsInForADilationBeyondTheMap) {
  at::manual_seed(7);
  const at::Tensor x = at::randn({2, 8, 6, 5}).requires_grad_(true);
  const at::Tensor w = at::randn({4, 8, 3, 3}).requires_grad_(true);
  EXPECT_TRUE(centre_tap_applies(x, w, {1, 1}, {6, 6}, {6, 6}));
  EXPECT_FALSE(centre_tap_applies(x, w, {1, 1}, {5, 5}, {5, 5}));  // the taps 5 rows away still see row 5
  EXPECT_FALSE(centre_tap_applies(x, w, {1, 1}, {1, 1}, {6, 6}));  // other padding: another output size
  const at::Tensor ours = conv2d_fast(x, w, c10::nullopt, {1, 1}, {6, 6}, {6, 6}, 1);
  const at::Tensor want = at::conv2d(x, w, {}, 1, 6, 6);
  EXPECT_LT(relative_error(ours, want), 1e-6);
  const auto g_ours = torch::autograd::grad({ours.sum()}, {x, w});
  const auto g_want = torch::autograd::grad({want.sum()}, {x, w});
  EXPECT_LT(relative_error(g_ours[0], g_want[0]), 1e-6);
  EXPECT_LT(relative_error(g_ours[1], g_want[1]), 1e-6);  // zero off the centre on both sides
  EXPECT_EQ(g_ours[1].slice(2, 0, 1).abs().max().item<float>(), 0.f);
}

TEST(Conv2dFast, SparseTapsSkipThePaddingAndMatchDirectConvolution) {
  // 32 x 32 with rate 24: each axis reads (32 + 2 x 8) / 96 = 1/2 inside, so 1/4 of the products;
  // rate 12: (32 + 2 x 20) / 96 = 3/4 per axis, 9/16 in all; rate 4: 0.84, left to oneDNN.
  const at::Tensor big = at::zeros({1, 1, 32, 32});
  EXPECT_DOUBLE_EQ(valid_tap_fraction(big, {24, 24}), 0.25);
  EXPECT_DOUBLE_EQ(valid_tap_fraction(big, {12, 12}), 0.5625);
  const at::Tensor w33 = at::zeros({1, 1, 3, 3});
  EXPECT_TRUE(sparse_taps_apply(big, w33, {1, 1}, {24, 24}, {24, 24}, 1));
  EXPECT_TRUE(sparse_taps_apply(big, w33, {1, 1}, {12, 12}, {12, 12}, 1));
  EXPECT_FALSE(sparse_taps_apply(big, w33, {1, 1}, {4, 4}, {4, 4}, 1));
  EXPECT_FALSE(sparse_taps_apply(big, w33, {2, 2}, {24, 24}, {24, 24}, 1));  // strided
  at::manual_seed(8);
  // (dilation y, x) on a 10 x 9 map: equal and unequal rates, one past the width.
  for (auto [dy, dx] : std::vector<std::pair<int64_t, int64_t>>{{6, 6}, {5, 7}, {8, 10}}) {
    const at::Tensor x = at::randn({2, 8, 10, 9}).requires_grad_(true);
    const at::Tensor w = at::randn({4, 8, 3, 3}).requires_grad_(true);
    const at::Tensor b = at::randn({4}).requires_grad_(true);
    ASSERT_TRUE(sparse_taps_apply(x, w, {1, 1}, {dy, dx}, {dy, dx}, 1)) << dy << "," << dx;
    const at::Tensor ours = conv2d_fast(x, w, b, {1, 1}, {dy, dx}, {dy, dx}, 1);
    const at::Tensor want = at::conv2d(x, w, b, 1, at::IntArrayRef({dy, dx}), at::IntArrayRef({dy, dx}));
    ASSERT_EQ(ours.sizes(), want.sizes());
    EXPECT_LT(relative_error(ours, want), 1e-6) << dy << "," << dx;
    const at::Tensor r = at::randn(want.sizes());
    const auto g_ours = torch::autograd::grad({(ours * r).sum()}, {x, w, b});
    const auto g_want = torch::autograd::grad({(want * r).sum()}, {x, w, b});
    for (int i = 0; i < 3; ++i) EXPECT_LT(relative_error(g_ours[i], g_want[i]), 1e-6) << dy << "," << dx << " grad " << i;
  }
}
