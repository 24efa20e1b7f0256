// Implements: the models benchmark: RetinaNet-ResNet50-FPN at 320x320 (train step at batch 2:
// forward + detection loss + backward + SGD; batch-1 network inference) against torchvision's
// retinanet_resnet50_fpn timed by bench/peers/bench_models_torchvision.py in the same run with the
// same threads, plus EfficientDet-D0 figures. Full inference (network + postprocessing at score
// threshold 0) is compared with torchvision's full inference. Prints one table with ratios (detseg / torchvision).
// Usage: bench_models [THREADS=2] [ITERS=3] [--no-peer] [--channels-last] [--inference-only] [--ab ROUNDS]
// DETSEG_MKLDNN_INFERENCE=0 times inference without the oneDNN-layout backbone path;
// DETSEG_CHANNELS_LAST=0 with plain (NCHW) conv weights, where detseg trains with channels-last
// ones (ops/fast_paths.h); --channels-last also feeds channels-last inputs.
// --ab ROUNDS: instead, the custom CPU fast paths (ops/fast_paths.h: oneDNN blocked inference)
// against plain ATen in one process, alternated ROUNDS times (on, off, on, off, ...), on the
// RetinaNet train step and network forward; prints each pair and the median ratio.
#include <ATen/ATen.h>
#include <torch/optim/sgd.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/bench_timing.h"
#include "bench/flop_counter.h"
#include "detseg/core/threads.h"
#include "detseg/config/config.h"
#include "detseg/losses/detection_loss.h"
#include "detseg/models/build.h"
#include "detseg/models/efficientdet_network.h"
#include "detseg/models/retinanet_network.h"
#include "detseg/ops/fast_paths.h"
#include "test_paths.h"

namespace {

using detseg::bench::peak_rss_mb;
using detseg::bench::timed;
using detseg::bench::Timing;

// Dense targets standing in for the anchor assignment (detseg/ops, not timed here): a few
// positives per image with small regression targets, some ignored anchors, the rest background.
struct DenseTargets {
  at::Tensor labels, boxes;
};
DenseTargets fake_targets(const detseg::DenseOutputs& out) {
  const int64_t n = out.cls_logits.size(0), a = out.cls_logits.size(1), k = out.cls_logits.size(2);
  at::Tensor labels = at::full({n, a}, -1, at::kLong);
  at::Tensor boxes = at::zeros({n, a, 4});
  for (int64_t i = 0; i < 40; ++i) {
    const int64_t idx = (i * 7919) % a;
    labels.index_put_({at::indexing::Slice(), idx}, i % k);
    boxes.index_put_({at::indexing::Slice(), idx}, at::full({4}, 0.05 * (1 + i % 3)));
    labels.index_put_({at::indexing::Slice(), (idx + 1) % a}, -2);
  }
  return {labels, boxes};
}

// Counts one conv's products by hand against FlopCounter (forward, and both gradients), so a
// figure of "fraction of peak" rests on a checked count.
bool flop_counter_checks_out() {
  const at::Tensor x = at::rand({2, 16, 32, 32}).set_requires_grad(true), w = at::rand({32, 16, 3, 3}).set_requires_grad(true);
  detseg::bench::FlopCounter counter;
  at::conv2d(x, w, {}, 1, 1).sum().backward();
  const double forward = 2.0 * 2 * 32 * 32 * 32 * 16 * 9;
  return counter.flops() == 3 * forward;
}

// Counts the convolution and matrix-product FLOPs of `step` (run once more under the counter).
double step_flops(const std::function<void()>& step) {
  detseg::bench::FlopCounter counter;
  step();
  return counter.flops();
}

template <typename Net>
std::pair<Timing, Timing> time_network(Net& net, int64_t size, int iters, bool channels_last, bool train = true,
                                       double* train_flops = nullptr) {
  auto to_input = [&](at::Tensor x) {
    return channels_last ? x.contiguous(at::MemoryFormat::ChannelsLast) : x;
  };
  std::vector<at::Tensor> trainable;
  for (auto& p : net->parameters()) {
    if (p.requires_grad()) trainable.push_back(p);
  }
  torch::optim::SGD sgd(trainable, torch::optim::SGDOptions(0.001).momentum(0.9));
  const at::Tensor train_images = to_input(at::rand({2, 3, size, size}));
  net->train();
  DenseTargets targets;
  {
    at::NoGradGuard g;
    targets = fake_targets(net->forward(train_images));
  }
  auto step = [&] {
    auto out = net->forward(train_images);
    auto losses = detseg::detection_loss(out.cls_logits, out.box_regression, targets.labels, targets.boxes);
    sgd.zero_grad();
    losses.total.backward();
    sgd.step();
  };
  const Timing train_s = !train ? Timing{} : timed(step, iters);
  if (train && train_flops) *train_flops = step_flops(step);
  net->eval();
  const at::Tensor image = to_input(at::rand({1, 3, size, size}));
  at::NoGradGuard g;
  const Timing infer_s = timed([&] { net->forward(image); }, iters);
  return {train_s, infer_s};
}

// Full batch-1 inference as a user gets it: network, top-k 5000, decode, per-class NMS, at score
// threshold 0 like the peer (torchvision's transform is a no-op at 320 with min = max size 320).
Timing time_full_detect(int iters) {
  detseg::PipelineConfig config = detseg::parse_config(
      "model: {type: retinanet, backbone: resnet50, num_classes: 91, image_size: 320}\n"
      "postprocess: {score_threshold: 0.0}\n",
      "bench_models");
  auto model = detseg::build_detector(config);
  detseg::to_fast_weight_layout(model->parameters());
  model->eval();
  detseg::Batch batch;
  batch.images = at::rand({1, 3, 320, 320});
  batch.image_sizes = at::full({1, 2}, 320, at::kLong);
  batch.original_sizes = batch.image_sizes.clone();
  batch.scales = at::ones({1});
  batch.geometries = {detseg::ImageGeometry{}};
  batch.boxes = at::zeros({1, 1, 4});
  batch.classes = at::full({1, 1}, -1, at::kLong);
  batch.iscrowd = at::zeros({1, 1}, at::kBool);
  batch.num_boxes = at::zeros({1}, at::kLong);
  batch.image_ids = {0};
  at::NoGradGuard g;
  return timed([&] { model->detect(batch); }, iters);
}

// The fast paths on and off, alternated in this process: each round times both, in turn.
void fast_paths_ab(int rounds, int iters) {
  detseg::RetinaNetNetwork net(detseg::RetinaNetNetworkOptions(91).depth(50));
  const detseg::FastPathOptions on = detseg::fast_paths();
  detseg::FastPathOptions off;
  off.mkldnn_inference = false;
  std::printf("fast paths A/B (on: mkldnn_inference %d) against plain ATen, %d rounds\n", on.mkldnn_inference, rounds);
  std::vector<double> train_ratio, infer_ratio;
  for (int r = 0; r < rounds; ++r) {
    detseg::set_fast_paths(on);
    const auto [train_on, infer_on] = time_network(net, 320, iters, false);
    detseg::set_fast_paths(off);
    const auto [train_off, infer_off] = time_network(net, 320, iters, false);
    train_ratio.push_back(train_on.wall / train_off.wall);
    infer_ratio.push_back(infer_on.wall / infer_off.wall);
    std::printf("round %d: train step %.3f / %.3f s (%.2fx), network fwd %.3f / %.3f s (%.2fx)\n", r + 1, train_on.wall,
                train_off.wall, train_ratio.back(), infer_on.wall, infer_off.wall, infer_ratio.back());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  std::printf("median on/off: train step %.2fx, network fwd %.2fx (below 1: the fast paths pay)\n", median(train_ratio),
              median(infer_ratio));
  detseg::set_fast_paths(on);
}

}  // namespace

int main(int argc, char** argv) {
  detseg::bench::print_machine();
  int threads = 2, iters = 3;
  bool peer = true, channels_last = false, train = true;
  int positional = 0, ab_rounds = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--ab") && i + 1 < argc) {
      ab_rounds = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--no-peer")) {
      peer = false;
    } else if (!std::strcmp(argv[i], "--inference-only")) {
      train = false;
    } else if (!std::strcmp(argv[i], "--channels-last")) {
      channels_last = true;
    } else if (positional++ == 0) {
      threads = std::atoi(argv[i]);
    } else {
      iters = std::atoi(argv[i]);
    }
  }
  detseg::set_threads(threads);
  at::manual_seed(0);
  // libgomp reads OMP_WAIT_POLICY at load time; the peer inherits this environment, so both run
  // with the same policy (`detseg` itself gives its engine passive; see docs/cli.md).
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  std::printf("bench_models: threads %d, iters %d%s, OMP_WAIT_POLICY=%s\n", threads, iters,
              channels_last ? ", channels-last" : "", wait_policy ? wait_policy : "(unset: spin, then sleep)");
  if (ab_rounds > 0) {
    fast_paths_ab(ab_rounds, iters);
    return 0;
  }

  detseg::RetinaNetNetwork retina(detseg::RetinaNetNetworkOptions(91).depth(50));
  detseg::to_fast_weight_layout(retina->parameters());  // as the engine does (DETSEG_CHANNELS_LAST=0: off)
  double r_flops = 0;
  const auto [r_train, r_infer] = time_network(retina, 320, iters, channels_last, train, &r_flops);
  const Timing r_full = time_full_detect(iters);
  const double r_rss = peak_rss_mb();

  nlohmann::json tv;
  if (peer)
    tv = detseg::bench::run_peer(std::string(DETSEG_PYTHON) + " " + DETSEG_SOURCE_DIR + "/bench/peers/bench_models_torchvision.py " +
                                 std::to_string(threads) + " " + std::to_string(iters));
  // "wall s / cpu s" for both, and ratios detseg / torchvision of each.
  auto row = [&](const char* name, const Timing& ours, const char* key) {
    std::printf("%-46s %7.3f / %7.3f", name, ours.wall, ours.cpu);
    if (tv.contains(key)) {
      const double w = tv[key][0].get<double>(), c = tv[key][1].get<double>();
      std::printf("   %7.3f / %7.3f   %.2fx / %.2fx", w, c, ours.wall / w, ours.cpu / c);
    }
    std::printf("\n");
  };
  std::printf("%-46s %17s   %17s   %s\n", "case (seconds: wall / process cpu)", "detseg",
              "torchvision", "ratio wall / cpu");
  row("retinanet_r50_fpn 320 train step (batch 2)", r_train, "train_step_s");
  row("retinanet_r50_fpn 320 network fwd (batch 1)", r_infer, "network_fwd_s");
  row("retinanet_r50_fpn 320 full inference (batch 1)", r_full, "infer_s");
  std::printf("%-46s %9.0f MB   %s\n", "peak RSS after RetinaNet", r_rss,
              tv.contains("peak_rss_mb") ? (std::to_string(static_cast<int>(tv["peak_rss_mb"].get<double>())) + " MB").c_str() : "-");

  // How much of the machine the step uses: its convolution and matrix-product FLOPs over its wall
  // time, against the sgemm peak on the same threads (the same kernels' ceiling).
  if (train) {
    const double peak = detseg::bench::gemm_peak_gflops();
    const double achieved = r_flops / r_train.wall / 1e9;
    std::printf("%-46s %.1f GFLOP/step, %.1f GFLOP/s = %.0f%% of the %.1f GFLOP/s sgemm peak on %d threads%s\n",
                "retinanet_r50_fpn 320 train step, achieved", r_flops / 1e9, achieved, 100 * achieved / peak, peak,
                threads, flop_counter_checks_out() ? "" : " (FLOP COUNT UNCHECKED: the conv self-check failed)");
  }

  detseg::EfficientDetNetwork d0(detseg::EfficientDetNetworkOptions(0, 90));
  detseg::to_fast_weight_layout(d0->parameters());
  const auto [d_train, d_infer] = time_network(d0, 512, iters, channels_last, train);
  row("efficientdet_d0 512 train step (batch 2)", d_train, "-");
  row("efficientdet_d0 512 network fwd (batch 1)", d_infer, "-");
  return 0;
}
