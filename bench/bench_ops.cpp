// Implements: the ops benchmark: times detseg's nms, batched_nms and roi_align on the inputs
// written by bench/peers/ops_peer.py, checks the outputs equal torchvision's, and prints the
// time ratios against torchvision's timings from the same run. Use bench/run_ops.sh.
// It also alternates the mask head's 2x2 stride-2 transposed convolution (ops/conv_transpose.h,
// a hand-written GEMM kernel) with LibTorch's own at::conv_transpose2d, which is what torchvision
// runs, in this process: the kernel stays only while it gains (issue 18's 10 % rule).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "bench_timing.h"
#include "detseg/core/threads.h"
#include "detseg/ops/conv_transpose.h"
#include "detseg/ops/nms.h"
#include "detseg/ops/roi_align.h"

namespace {

std::string g_dir;

at::Tensor load(const std::string& name, at::ScalarType type, std::vector<int64_t> shape) {
  std::ifstream in(g_dir + "/" + name + ".bin", std::ios::binary);
  if (!in) throw std::runtime_error("bench_ops: cannot read " + g_dir + "/" + name + ".bin");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const int64_t elem = static_cast<int64_t>(at::elementSize(type));
  int64_t known = 1;
  for (auto s : shape) known *= s < 0 ? 1 : s;
  for (auto& s : shape)
    if (s < 0) s = static_cast<int64_t>(bytes.size()) / elem / known;
  auto t = at::empty(shape, type);
  if (static_cast<size_t>(t.numel() * elem) != bytes.size())
    throw std::runtime_error("bench_ops: " + name + " has an unexpected size");
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

double best_of(int reps, const std::function<void()>& fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

void report(const char* name, double ours, const nlohmann::json& peer, const std::string& check) {
  const double theirs = peer["seconds"].get<double>();
  std::printf("%-28s detseg %9.4f s   torchvision %9.4f s   ratio %6.3f   %s\n", name, ours, theirs,
              ours / theirs, check.c_str());
}

// "same kept indices", or, when only the order among equal scores differs (torchvision's final
// sort is not stable), says so; anything else is reported as a difference.
std::string compare_keep(const at::Tensor& keep, const at::Tensor& want, const at::Tensor& scores) {
  if (at::equal(keep, want)) return "same kept indices";
  if (keep.numel() == want.numel() &&
      at::equal(std::get<0>(keep.sort()), std::get<0>(want.sort())) &&
      at::equal(scores.index_select(0, keep), scores.index_select(0, want)))
    return "same kept set; order differs only among equal scores";
  return "KEPT INDICES DIFFER (" + std::to_string(keep.numel()) + " vs " +
         std::to_string(want.numel()) + ")";
}

}  // namespace

int main(int argc, char** argv) {
  detseg::bench::print_machine();
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_ops DATA_DIR [threads]  (see bench/run_ops.sh)\n");
    return 2;
  }
  g_dir = argv[1];
  detseg::set_threads(argc > 2 ? std::stoi(argv[2]) : 2);
  nlohmann::json tv;
  std::ifstream(g_dir + "/torchvision.json") >> tv;
  std::printf("threads: detseg %d, torchvision %d\n", at::get_num_threads(), tv["threads"].get<int>());

  for (int n : {10000, 100000}) {
    const std::string key = "nms_" + std::to_string(n);
    if (!tv.contains(key)) continue;
    const std::string p = "nms" + std::to_string(n);
    auto boxes = load(p + "_boxes", at::kFloat, {-1, 4});
    auto scores = load(p + "_scores", at::kFloat, {-1});
    auto want = load(p + "_keep", at::kLong, {-1});
    at::Tensor keep;
    double t = best_of(3, [&] { keep = detseg::nms(boxes, scores, 0.5); });
    report(("nms " + std::to_string(n) + " boxes").c_str(), t, tv[key],
           compare_keep(keep, want, scores));
  }
  {
    auto boxes = load("bnms_boxes", at::kFloat, {-1, 4});
    auto scores = load("bnms_scores", at::kFloat, {-1});
    auto classes = load("bnms_classes", at::kLong, {-1});
    auto want = load("bnms_keep", at::kLong, {-1});
    at::Tensor keep;
    double t = best_of(3, [&] { keep = detseg::batched_nms(boxes, scores, classes, 0.5); });
    report("batched_nms 80 x 1000", t, tv["batched_nms_80x1000"], compare_keep(keep, want, scores));
  }
  {
    auto feat = load("roi_feat", at::kFloat, {2, 256, 80, 80});
    auto rois = load("roi_rois", at::kFloat, {-1, 5});
    detseg::RoiAlignOptions o;
    o.output_size = {7, 7};
    o.spatial_scale = 1.0 / 8;
    o.sampling_ratio = 2;
    o.aligned = true;
    at::Tensor out;
    double t = best_of(3, [&] { out = detseg::roi_align_forward(feat, rois, o); });
    auto want = load("roi_out_first20", at::kFloat, {20, 256, 7, 7});
    double diff = (out.slice(0, 0, 20) - want).abs().max().item<double>();
    report("roi_align forward", t, tv["roi_align_forward"], "max |diff| " + std::to_string(diff));
    at::Tensor grad;
    double tb = best_of(3, [&] {
      auto x = feat.clone().requires_grad_(true);
      detseg::roi_align(x, rois, o).sum().backward();
      grad = x.grad();
    });
    auto want_g = load("roi_grad_first_channel", at::kFloat, {2, 1, 80, 80});
    double gdiff = (grad.slice(1, 0, 1) - want_g).abs().max().item<double>();
    report("roi_align forward+backward", tb, tv["roi_align_forward_backward"],
           "max |grad diff| " + std::to_string(gdiff));
  }
  {
    // Mask R-CNN's conv5_mask: 100 regions, 256 channels, 14x14 -> 28x28.
    const at::Tensor x = at::randn({100, 256, 14, 14});
    const at::Tensor w = at::randn({256, 256, 2, 2}) * 0.05;
    const at::Tensor b = at::randn({256});
    const auto ours = [&] { return detseg::conv_transpose2x2_stride2(x, w, b); };
    const auto aten = [&] { return at::conv_transpose2d(x, w, b, {2, 2}); };
    const double diff = (ours() - aten()).abs().max().item<double>();
    const auto backward = [&](bool use_ours) {
      auto xg = x.clone().requires_grad_(true);
      auto wg = w.clone().requires_grad_(true);
      auto y = use_ours ? detseg::conv_transpose2x2_stride2(xg, wg, b) : at::conv_transpose2d(xg, wg, b, {2, 2});
      y.sum().backward();
    };
    double f_ours = 1e30, f_aten = 1e30, b_ours = 1e30, b_aten = 1e30;
    for (int round = 0; round < 3; ++round) {  // alternated, best of each
      f_ours = std::min(f_ours, best_of(3, [&] { ours(); }));
      f_aten = std::min(f_aten, best_of(3, [&] { aten(); }));
      b_ours = std::min(b_ours, best_of(2, [&] { backward(true); }));
      b_aten = std::min(b_aten, best_of(2, [&] { backward(false); }));
    }
    std::printf("%-28s detseg %9.4f s   at::conv_transpose2d %9.4f s   ratio %6.3f   max |diff| %.2e\n",
                "conv_transpose 2x2 s2 fwd", f_ours, f_aten, f_ours / f_aten, diff);
    std::printf("%-28s detseg %9.4f s   at::conv_transpose2d %9.4f s   ratio %6.3f\n",
                "conv_transpose fwd+bwd", b_ours, b_aten, b_ours / b_aten);
  }
  return 0;
}
