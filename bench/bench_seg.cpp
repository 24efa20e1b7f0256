// Implements: the segmentation benchmark: DeepLabv3 ResNet-50 at output stride 8 (torchvision's
// deeplabv3_resnet50 layout: trainable batch norm, ASPP 12/24/36) at 256x256 — train step at batch
// 2 (forward, DeepLab's softmax cross-entropy on labels with ignored pixels, backward, SGD
// momentum) and batch-1 inference to a full-resolution label map — against torchvision's model
// timed by bench/peers/bench_seg_torchvision.py in the same run with the same threads. Also prints
// DeepLabv3+ (decoder) and MobileNetV2 figures. torchvision's head has one more 3x3 conv (256 ch)
// + BN after the ASPP than DeepLab's (and ours), about 3% of the network's work at this size.
// The "frozen backbone BN" rows are DeepLab's small-batch setting (fine_tune_batch_norm false):
// ours folds the frozen statistics into the convs; torchvision's is built with FrozenBatchNorm2d.
// Usage: bench_seg [THREADS=2] [ITERS=3] [--no-peer] [--inference-only]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/optim/sgd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/bench_timing.h"
#include "detseg/core/threads.h"
#include "detseg/config/config.h"
#include "detseg/models/build.h"
#include "detseg/ops/fast_paths.h"
#include "test_paths.h"

namespace {

using detseg::bench::timed;
using detseg::bench::Timing;

constexpr int64_t kSize = 256;

detseg::Batch make_batch(int64_t n) {
  detseg::Batch b;
  b.images = at::rand({n, 3, kSize, kSize});
  b.image_sizes = at::full({n, 2}, kSize, at::kLong);
  b.original_sizes = b.image_sizes.clone();
  b.label_maps = at::randint(0, 21, {n, kSize, kSize}, at::kLong);
  b.label_maps.slice(1, 0, 16).fill_(255);  // some ignored rows, as void would be
  for (int64_t i = 0; i < n; ++i) b.image_ids.push_back(i);
  return b;
}

// {train step, inference}; the train step is not timed (zero) when `train` is false.
std::pair<Timing, Timing> time_model(const std::string& type, const std::string& backbone, int iters,
                                     bool train_too, bool frozen_bn = false) {
  detseg::PipelineConfig config = detseg::parse_config(
      "model: {type: " + type + ", backbone: " + backbone + ", num_classes: 21, frozen_batch_norm: " +
          (frozen_bn ? "true" : "false") + ",\n"
      "        deeplab: {output_stride: 8, crop_size: 256}}\n",
      "bench_seg");
  auto model = detseg::build_segmenter(config);
  detseg::to_fast_weight_layout(model->parameters());  // as the engine does (DETSEG_CHANNELS_LAST=0: off)
  std::vector<at::Tensor> params;
  for (auto& p : model->parameters())
    if (p.requires_grad()) params.push_back(p);
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.001).momentum(0.9));
  const detseg::Batch train = make_batch(2), one = make_batch(1);
  model->train();
  const Timing train_s = !train_too ? Timing{} : timed(
      [&] {
        detseg::ModelLosses l = model->losses(train);
        sgd.zero_grad();
        l.total.backward();
        sgd.step();
      },
      iters);
  model->eval();
  at::NoGradGuard g;
  const Timing infer_s = timed([&] { model->segment(one); }, iters);
  return {train_s, infer_s};
}

}  // namespace

int main(int argc, char** argv) {
  detseg::bench::print_machine();
  int threads = 2, iters = 3, positional = 0;
  bool peer = true, train = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-peer")) peer = false;
    else if (!std::strcmp(argv[i], "--inference-only")) train = false;
    else if (positional++ == 0) threads = std::atoi(argv[i]);
    else iters = std::atoi(argv[i]);
  }
  detseg::set_threads(threads);
  at::manual_seed(0);
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  std::printf("bench_seg: threads %d, iters %d, OMP_WAIT_POLICY=%s\n", threads, iters,
              wait_policy ? wait_policy : "(unset: spin, then sleep)");
  const auto [v3_train, v3_infer] = time_model("deeplabv3", "resnet50", iters, train);
  const auto [fz_train, fz_infer] = time_model("deeplabv3", "resnet50", iters, train, /*frozen_bn=*/true);
  nlohmann::json tv;
  if (peer)
    tv = detseg::bench::run_peer(std::string(DETSEG_PYTHON) + " " + DETSEG_SOURCE_DIR + "/bench/peers/bench_seg_torchvision.py " +
                                 std::to_string(threads) + " " + std::to_string(iters) +
                                 (train ? "" : " --inference-only"));
  auto row = [&](const char* name, const Timing& ours, const char* key) {
    if (!train && std::strstr(name, "train")) return;
    std::printf("%-50s %7.3f / %7.3f", name, ours.wall, ours.cpu);
    if (tv.contains(key)) {
      const double w = tv[key][0].get<double>(), c = tv[key][1].get<double>();
      std::printf("   %7.3f / %7.3f   %.2fx / %.2fx", w, c, ours.wall / w, ours.cpu / c);
    }
    std::printf("\n");
  };
  std::printf("%-50s %17s   %17s   %s\n", "case (seconds: wall / process cpu)", "detseg", "torchvision",
              "ratio wall / cpu");
  row("deeplabv3 r50 os8 256 train step (batch 2)", v3_train, "train_step_s");
  row("deeplabv3 r50 os8 256 inference (batch 1)", v3_infer, "infer_s");
  row("same, frozen backbone BN: train step (batch 2)", fz_train, "train_step_frozen_s");
  row("same, frozen backbone BN: inference (batch 1)", fz_infer, "infer_frozen_s");
  const auto [plus_train, plus_infer] = time_model("deeplabv3plus", "resnet50", iters, train);
  row("deeplabv3plus r50 os8 256 train step (batch 2)", plus_train, "-");
  row("deeplabv3plus r50 os8 256 inference (batch 1)", plus_infer, "-");
  const auto [mob_train, mob_infer] = time_model("deeplabv3plus", "mobilenet_v2", iters, train);
  row("deeplabv3plus mobilenet_v2 os8 256 train (batch 2)", mob_train, "-");
  row("deeplabv3plus mobilenet_v2 os8 256 inference (b 1)", mob_infer, "-");
  std::printf("%-50s %9.0f MB\n", "peak RSS", detseg::bench::peak_rss_mb());
  return 0;
}
