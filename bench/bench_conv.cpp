// Implements: the 3x3 convolution benchmark: detseg's Winograd F(2x2, 3x3) conv against LibTorch's
// direct at::conv2d (oneDNN, the kernel torchvision's models run) on the layer shapes of the
// detectors and DeepLab at their benchmark sizes (atrous ones too, and the centre-tap rule of
// conv2d_fast), forward alone and forward + backward (input, weight and bias gradients), with the
// largest relative difference of the outputs.
// Usage: bench_conv [THREADS=2] [PAIRS=9] [TILE=2 (F(2x2, 3x3)) or 4 (F(4x4, 3x3))]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_timing.h"
#include "detseg/core/threads.h"
#include "detseg/ops/conv2d_fast.h"
#include "detseg/ops/winograd_conv.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Case {
  const char* name;
  int64_t n, c, k, h, w, dilation = 1;
  bool through_conv2d_fast = false;  // time detseg::conv2d_fast (its centre-tap and sparse-tap rules) instead
};

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 9;
  const int64_t tile = argc > 3 ? std::atoi(argv[3]) : 2;
  detseg::set_threads(threads);
  at::manual_seed(0);
  const std::vector<Case> cases = {
      {"retinanet head conv, P3 of 320 (batch 2)", 2, 256, 256, 40, 40},
      {"retinanet cls_logits, P3 of 320 (batch 2)", 2, 256, 819, 40, 40},
      {"retinanet head conv, P5 of 320 (batch 2)", 2, 256, 256, 10, 10},
      {"fpn/rpn conv, P2 of 320 (batch 2)", 2, 256, 256, 80, 80},
      {"mask head conv, 128 RoIs 14x14", 128, 256, 256, 14, 14},
      {"deeplab decoder conv, 64x64 (batch 2)", 2, 304, 256, 64, 64},
      {"resnet layer1 3x3, 80x80 (batch 2)", 2, 64, 64, 80, 80},
      {"resnet layer2 3x3, 40x40 (batch 2)", 2, 128, 128, 40, 40},
      {"resnet layer3 3x3, 20x20 (batch 2)", 2, 256, 256, 20, 20},
      {"resnet layer4 3x3, 10x10 (batch 2)", 2, 512, 512, 10, 10},
      {"deeplab os8 layer3 3x3 rate 2, 32x32 (b 2)", 2, 256, 256, 32, 32, 2},
      {"deeplab os8 layer4 3x3 rate 4, 32x32 (b 2)", 2, 512, 512, 32, 32, 4},
      {"aspp rate 36 on 32x32 (batch 2): centre tap", 2, 2048, 256, 32, 32, 36, true},
      {"aspp rate 24 on 32x32 (batch 2): sparse taps", 2, 2048, 256, 32, 32, 24, true},
      {"aspp rate 12 on 32x32 (batch 2): sparse taps", 2, 2048, 256, 32, 32, 12, true},
  };
  std::printf("bench_conv: threads %d, pairs %d, F(%dx%d, 3x3); median wall seconds per call, median ratio winograd / direct\n",
              threads, iters, static_cast<int>(tile), static_cast<int>(tile));
  std::printf("%-44s %-6s %9s %9s %19s %9s\n", "case", "pass", "direct s", "winograd s", "ratio (min-max)", "max rel");
  for (const Case& c : cases) {
    const at::Tensor x = at::randn({c.n, c.c, c.h, c.w}).requires_grad_(true);
    const at::Tensor w = (0.05 * at::randn({c.k, c.c, 3, 3})).requires_grad_(true);
    const at::Tensor b = at::randn({c.k}).requires_grad_(true);
    const at::Tensor dy = at::randn({c.n, c.k, c.h, c.w});
    const int64_t d = c.dilation;
    auto direct = [&] { return at::conv2d(x, w, b, 1, d, d); };
    auto ours = [&] {
      return c.through_conv2d_fast ? detseg::conv2d_fast(x, w, b, {1, 1}, {d, d}, {d, d}, 1)
                                   : detseg::winograd_conv3x3(x, w, b, d, tile);
    };
    double rel = 0;
    {
      at::NoGradGuard g;
      rel = ((ours() - direct()).abs().max() / direct().abs().max()).item<double>();
    }
    // Direct and Winograd alternate call by call and the ratio is taken pair by pair, so the
    // medians hold while this shared machine's speed drifts.
    auto run = [&](const char* pass, auto direct, auto wino) {
      direct();
      wino();
      std::vector<double> d, wg, ratio;
      for (int i = 0; i < iters; ++i) {
        d.push_back(detseg::bench::timed(direct, 1, false).wall);
        wg.push_back(detseg::bench::timed(wino, 1, false).wall);
        ratio.push_back(wg.back() / d.back());
      }
      std::printf("%-44s %-6s %9.4f %9.4f %6.2fx (%.2f-%.2f) %9.1e\n", c.name, pass, median(d), median(wg),
                  median(ratio), *std::min_element(ratio.begin(), ratio.end()),
                  *std::max_element(ratio.begin(), ratio.end()), rel);
    };
    run(
        "fwd", [&] { at::NoGradGuard g; direct(); }, [&] { at::NoGradGuard g; ours(); });
    run(
        "fwd+bw", [&] { torch::autograd::grad({direct()}, {x, w, b}, {dy}); },
        [&] { torch::autograd::grad({ours()}, {x, w, b}, {dy}); });
  }
  return 0;
}
