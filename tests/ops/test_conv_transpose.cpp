// Implements: tests of conv_transpose2x2_stride2 (1x1 conv + pixel shuffle): a hand-worked value,
// and forward and all three gradients against LibTorch's at::conv_transpose2d.
#include <torch/csrc/autograd/autograd.h>

#include "detseg/ops/conv_transpose.h"
#include "ops/ops_test_util.h"

using namespace detseg;
using namespace detseg::testing;

TEST(ConvTranspose2x2, HandWorkedTapsLandOnTheirOwnPixels) {
  // One input channel, one output channel, input [[1, 2]], taps [[1, 10], [100, 1000]], bias 0.5:
  // each input pixel becomes a 2x2 block of itself times the taps.
  const at::Tensor x = F({1, 2}, {1, 1, 1, 2});
  const at::Tensor w = F({1, 10, 100, 1000}, {1, 1, 2, 2});
  const at::Tensor y = conv_transpose2x2_stride2(x, w, at::full({1}, 0.5f));
  expect_close(y, F({1.5f, 10.5f, 2.5f, 20.5f, 100.5f, 1000.5f, 200.5f, 2000.5f}, {1, 1, 2, 4}));
}

TEST(ConvTranspose2x2, ForwardAndGradientsMatchConvTranspose2d) {
  at::manual_seed(5);
  // Float on the CPU runs the GEMM kernel: a few images (one at a time) and many (in parallel);
  // double runs the 1x1 conv + pixel shuffle form.
  struct Case {
    int64_t n;
    at::ScalarType dtype;
    bool with_bias;
  };
  for (const Case& k : {Case{3, at::kFloat, true}, Case{3, at::kFloat, false}, Case{9, at::kFloat, true},
                        Case{3, at::kDouble, true}}) {
    const bool with_bias = k.with_bias;
    const auto opts = at::TensorOptions().dtype(k.dtype);
    const at::Tensor x = at::randn({k.n, 16, 7, 5}, opts).requires_grad_(true);
    const at::Tensor w = (0.2 * at::randn({16, 24, 2, 2}, opts)).requires_grad_(true);
    const at::Tensor b = with_bias ? at::randn({24}, opts).requires_grad_(true) : at::Tensor();
    const at::Tensor ours = conv_transpose2x2_stride2(x, w, b);
    const at::Tensor want = at::conv_transpose2d(x, w, b, 2);
    expect_close(ours, want, 1e-5);
    const at::Tensor dy = at::randn(want.sizes(), opts);
    std::vector<at::Tensor> inputs{x, w};
    if (with_bias) inputs.push_back(b);
    const auto g_ours = torch::autograd::grad({ours}, inputs, {dy});
    const auto g_want = torch::autograd::grad({want}, inputs, {dy});
    for (size_t i = 0; i < inputs.size(); ++i) expect_close(g_ours[i], g_want[i], 1e-4);
    // A frozen weight: the input gradient alone.
    const at::Tensor frozen = w.detach();
    expect_close(torch::autograd::grad({conv_transpose2x2_stride2(x, frozen, b)}, {x}, {dy})[0], g_want[0], 1e-4);
  }
  EXPECT_THROW(conv_transpose2x2_stride2(at::zeros({1, 4, 3, 3}), at::zeros({4, 2, 3, 3}), {}), std::exception);
}
