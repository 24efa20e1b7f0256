// Implements: the two-stage benchmark: Faster R-CNN and Mask R-CNN (ResNet-50 + FPN, 91 classes)
// at 320x320 through the meta-architecture as training and `detseg predict` run it (train step at
// batch 2: forward, target assignment, sampling, losses, backward, SGD; batch-1 full inference at
// score threshold 0), against torchvision's fasterrcnn_resnet50_fpn / maskrcnn_resnet50_fpn timed
// by bench/peers/bench_two_stage_torchvision.py in the same run with the same threads. The
// configuration follows torchvision's: RPN coder scales 1, loss weights 1, 2000 pre-NMS anchors,
// 1000 proposals, 512 sampled proposals (25% positive) with the ground truth added.
// Prints one table with ratios (detseg / torchvision).  Usage: bench_two_stage [THREADS=2] [ITERS=3] [--no-peer]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/optim/sgd.h>


#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/bench_timing.h"
#include "detseg/core/threads.h"
#include "detseg/config/config.h"
#include "detseg/models/build.h"
#include "detseg/ops/fast_paths.h"
#include "test_paths.h"

namespace {

using detseg::bench::peak_rss_mb;
using detseg::bench::timed;
using detseg::bench::Timing;

// The peer's batch: two 320x320 images with the same two boxes (classes 1 and 5 of torchvision's
// 91, i.e. our 0 and 4) and rectangular masks.
detseg::Batch make_batch(int64_t n) {
  detseg::Batch b;
  b.images = at::rand({n, 3, 320, 320});
  b.image_sizes = at::full({n, 2}, 320, at::kLong);
  b.original_sizes = b.image_sizes.clone();
  b.scales = at::ones({n});
  b.geometries.resize(static_cast<size_t>(n));
  b.boxes = at::tensor({20.f, 30.f, 120.f, 160.f, 150.f, 40.f, 300.f, 300.f}).view({1, 2, 4}).repeat({n, 1, 1});
  b.classes = at::tensor({0, 4}, at::kLong).view({1, 2}).repeat({n, 1});
  b.iscrowd = at::zeros({n, 2}, at::kBool);
  b.num_boxes = at::full({n}, 2, at::kLong);
  b.masks = at::zeros({n, 2, 320, 320}, at::kByte);
  b.masks.select(1, 0).slice(1, 40, 150).slice(2, 30, 110).fill_(1);
  b.masks.select(1, 1).slice(1, 60, 280).slice(2, 170, 290).fill_(1);
  for (int64_t i = 0; i < n; ++i) b.image_ids.push_back(i);
  return b;
}

std::pair<Timing, Timing> bench(const std::string& type, int iters) {
  detseg::PipelineConfig config = detseg::parse_config(
      "model: {type: " + type + ", backbone: resnet50, num_classes: 90, image_size: 320,\n"
      "        faster_rcnn: {number_of_stages: " + std::string(type == "mask_rcnn" ? "3" : "2") + ",\n"
      "          first_stage_box_coder_scales: [1, 1, 1, 1], first_stage_localization_loss_weight: 1.0,\n"
      "          second_stage_localization_loss_weight: 1.0, first_stage_pre_nms_top_k: 2000,\n"
      "          first_stage_max_proposals: 1000, second_stage_batch_size: 512,\n"
      "          second_stage_add_groundtruth_proposals: true}}\n"
      "postprocess: {score_threshold: 0.0, max_detections_per_image: 100}\n",
      "bench_two_stage");
  at::manual_seed(0);
  auto model = detseg::build_detector(config);
  detseg::to_fast_weight_layout(model->parameters());  // as the engine does (DETSEG_CHANNELS_LAST=0: off)
  std::vector<at::Tensor> trainable;
  for (auto& p : model->parameters())
    if (p.requires_grad()) trainable.push_back(p);
  torch::optim::SGD sgd(trainable, torch::optim::SGDOptions(0.001).momentum(0.9));
  const detseg::Batch train_batch = make_batch(2);
  model->train();
  const Timing train = timed(
      [&] {
        detseg::ModelLosses l = model->losses(train_batch);
        sgd.zero_grad();
        l.total.backward();
        sgd.step();
      },
      iters);
  model->eval();
  const detseg::Batch infer_batch = make_batch(1);
  at::NoGradGuard g;
  const Timing infer = timed([&] { model->detect(infer_batch); }, iters);
  return {train, infer};
}

}  // namespace

int main(int argc, char** argv) {
  detseg::bench::print_machine();
  int threads = 2, iters = 3, positional = 0;
  bool peer = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-peer")) {
      peer = false;
    } else if (positional++ == 0) {
      threads = std::atoi(argv[i]);
    } else {
      iters = std::atoi(argv[i]);
    }
  }
  detseg::set_threads(threads);
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  std::printf("bench_two_stage: threads %d, iters %d, OMP_WAIT_POLICY=%s\n", threads, iters,
              wait_policy ? wait_policy : "(unset)");
  const auto [f_train, f_infer] = bench("faster_rcnn", iters);
  const double f_rss = peak_rss_mb();
  const auto [m_train, m_infer] = bench("mask_rcnn", iters);
  const double m_rss = peak_rss_mb();

  nlohmann::json tv;
  if (peer)
    tv = detseg::bench::run_peer(std::string(DETSEG_PYTHON) + " " + DETSEG_SOURCE_DIR + "/bench/peers/bench_two_stage_torchvision.py " +
                                 std::to_string(threads) + " " + std::to_string(iters));
  auto row = [&](const char* name, const Timing& ours, const char* key) {
    std::printf("%-44s %7.3f / %7.3f", name, ours.wall, ours.cpu);
    if (tv.contains(key)) {
      const double w = tv[key][0].get<double>(), c = tv[key][1].get<double>();
      std::printf("   %7.3f / %7.3f   %.2fx / %.2fx", w, c, ours.wall / w, ours.cpu / c);
    }
    std::printf("\n");
  };
  auto rss = [&](const char* name, double ours, const char* key) {
    std::printf("%-44s %9.0f MB", name, ours);
    if (tv.contains(key)) std::printf("   %9.0f MB   %.2fx", tv[key].get<double>(), ours / tv[key].get<double>());
    std::printf("\n");
  };
  std::printf("%-44s %17s   %17s   %s\n", "case (seconds: wall / process cpu)", "detseg", "torchvision",
              "ratio wall / cpu");
  row("faster_rcnn_r50_fpn 320 train step (batch 2)", f_train, "faster_rcnn_train_step_s");
  row("faster_rcnn_r50_fpn 320 inference (batch 1)", f_infer, "faster_rcnn_infer_s");
  rss("peak RSS after Faster R-CNN", f_rss, "faster_rcnn_peak_rss_mb");
  row("mask_rcnn_r50_fpn 320 train step (batch 2)", m_train, "mask_rcnn_train_step_s");
  row("mask_rcnn_r50_fpn 320 inference (batch 1)", m_infer, "mask_rcnn_infer_s");
  rss("peak RSS after Mask R-CNN", m_rss, "mask_rcnn_peak_rss_mb");
  return 0;
}
