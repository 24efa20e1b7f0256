// Implements: the GPU benchmark's detseg half: RetinaNet, Faster R-CNN and Mask R-CNN (ResNet-50 +
// FPN, 91-class heads) on SIZE x SIZE images and DeepLabv3-ResNet50 (output stride 8) on SEG x SEG,
// batch BATCH, through the meta-architectures as `detseg train` and `detseg predict` run them: the
// train step is forward, target assignment, losses, backward and an SGD step; inference is the
// full detect/segment call (postprocessing at score threshold 0.05). fp32 and bf16 (autocast).
// Prints one JSON object: per model and precision, ms per train step and per inference batch,
// images/s, and the peak GPU memory of each phase. bench/peers/bench_gpu_torchvision.py measures
// torchvision 0.26 the same way and bench/peers/gpu_report.py prints the ratios
// (scripts/device_check.sh runs all three).
// Usage: bench_gpu [--device cuda|cpu] [--size 1024] [--seg-size 512] [--batch 8] [--iters 8]
//                  [--models retinanet,faster_rcnn,mask_rcnn,deeplabv3] [--precisions fp32,bf16]
//                  [--profile MODEL,...]  (GPU kernel times of those models' fp32 train step)
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>
#include <torch/optim/sgd.h>

#if __has_include(<c10/cuda/CUDACachingAllocator.h>)
#include <c10/cuda/CUDACachingAllocator.h>
#define DETSEG_BENCH_GPU_MEMORY 1
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_timing.h"
#include "detseg/config/config.h"
#include "detseg/data/loader.h"
#include "detseg/engine/device.h"
#include "detseg/models/build.h"
#include "detseg/ops/nms.h"
#include "detseg/ops/roi_align.h"

namespace {

struct Args {
  std::string device = "cuda";
  int64_t size = 1024, seg_size = 512, batch = 8;
  int iters = 8;
  std::vector<std::string> models = {"retinanet", "faster_rcnn", "mask_rcnn", "deeplabv3"};
  std::vector<std::string> precisions = {"fp32", "bf16"};
  std::vector<std::string> profile;  // models whose fp32 train step is profiled (GPU kernel times)
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

void synchronize(const at::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

void reset_peak_memory(const at::Device& device) {
#ifdef DETSEG_BENCH_GPU_MEMORY
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#else
  (void)device;
#endif
}

double peak_memory_mb(const at::Device& device) {
#ifdef DETSEG_BENCH_GPU_MEMORY
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return static_cast<double>(
               stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak) /
           (1024.0 * 1024.0);
  }
#endif
  (void)device;
  return 0;
}

// Milliseconds per call after two warm-up calls, the device drained before and after. The peak
// memory counter restarts after the warm-ups: cuDNN's algorithm search (benchmark mode) tries
// workspaces of tens of GB on the first calls, which says nothing about the model.
double time_ms(const std::function<void()>& fn, int iters, const at::Device& device) {
  fn();
  fn();
  synchronize(device);
  reset_peak_memory(device);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) fn();
  synchronize(device);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / iters;
}

// The GPU kernels of `steps` calls of fn: the 25 largest by total time (ms per call) and the total
// kernel time per call, to set beside the wall time (the gap is host overhead and syncs).
nlohmann::json profile_kernels(const std::function<void()>& fn, int steps, const at::Device& device) {
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
  const std::set<ActivityType> activities = {ActivityType::CPU, ActivityType::CUDA};
  prof::prepareProfiler(config, activities);
  prof::enableProfiler(config, activities);
  for (int i = 0; i < steps; ++i) fn();
  synchronize(device);
  const auto result = prof::disableProfiler();
  std::map<std::string, std::pair<double, int64_t>> kernels;
  double total_ms = 0;
  for (const auto& e : result->events()) {
    if (e.deviceType() != c10::DeviceType::CUDA) continue;
    const double ms = static_cast<double>(e.durationNs()) / 1e6 / steps;
    auto& k = kernels[e.name().substr(0, 140)];
    k.first += ms;
    k.second += 1;
    total_ms += ms;
  }
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> sorted(kernels.begin(), kernels.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  nlohmann::json top = nlohmann::json::array();
  for (size_t i = 0; i < sorted.size() && i < 25; ++i)
    top.push_back({sorted[i].first, sorted[i].second.first, sorted[i].second.second / steps});
  return {{"kernel_ms_per_step", total_ms}, {"kernels_per_step", [&] {
             int64_t n = 0;
             for (auto& [name, k] : kernels) n += k.second;
             return n / steps;
           }()}, {"top", top}};
}

// The peer's batch: `n` random images with the same three boxes (torchvision labels 1, 5 and 18,
// our 0, 4 and 17) and rectangular instance masks; segmenters get random labels.
detseg::Batch make_batch(int64_t n, int64_t size, bool masks, bool label_maps) {
  detseg::Batch b;
  b.images = at::rand({n, 3, size, size});
  b.image_sizes = at::full({n, 2}, size, at::kLong);
  b.original_sizes = b.image_sizes.clone();
  b.scales = at::ones({n});
  b.geometries.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) b.image_ids.push_back(i);
  if (label_maps) {
    b.label_maps = at::randint(0, 21, {n, size, size}, at::kLong);
    return b;
  }
  const double s = static_cast<double>(size) / 320.0;
  const at::Tensor boxes = at::tensor({20.f, 30.f, 120.f, 160.f, 150.f, 40.f, 300.f, 300.f, 60.f, 200.f, 140.f, 310.f})
                               .view({1, 3, 4}) * s;
  b.boxes = boxes.repeat({n, 1, 1});
  b.classes = at::tensor({0, 4, 17}, at::kLong).view({1, 3}).repeat({n, 1});
  b.iscrowd = at::zeros({n, 3}, at::kBool);
  b.num_boxes = at::full({n}, 3, at::kLong);
  if (masks) {
    b.masks = at::zeros({n, 3, size, size}, at::kByte);
    const at::Tensor r = (boxes[0] + 0.5).to(at::kLong);
    for (int64_t k = 0; k < 3; ++k)
      b.masks.select(1, k)
          .slice(1, r[k][1].item<int64_t>(), r[k][3].item<int64_t>())
          .slice(2, r[k][0].item<int64_t>(), r[k][2].item<int64_t>())
          .fill_(1);
  }
  return b;
}

std::string config_text(const std::string& model, int64_t size) {
  if (model == "deeplabv3")
    return "model: {type: deeplabv3, backbone: resnet50, num_classes: 21, frozen_batch_norm: false,\n"
           "        deeplab: {output_stride: 8, crop_size: " + std::to_string(size) + "}}\n";
  std::string text = "model: {type: " + model + ", backbone: resnet50, num_classes: 90, image_size: " +
                     std::to_string(size);
  // torchvision's configuration: RPN coder scales 1, loss weights 1, 2000 pre-NMS anchors, 2000
  // training proposals (1000 at inference), 512 sampled proposals (25% positive) + the ground truth.
  if (model != "retinanet")
    text += ",\n  faster_rcnn: {number_of_stages: " + std::string(model == "mask_rcnn" ? "3" : "2") +
            ", first_stage_box_coder_scales: [1, 1, 1, 1], first_stage_localization_loss_weight: 1.0,\n"
            "    second_stage_localization_loss_weight: 1.0, first_stage_pre_nms_top_k: 2000,\n"
            "    first_stage_max_proposals: 1000, second_stage_batch_size: 512,\n"
            "    second_stage_add_groundtruth_proposals: true}";
  return text + "}\npostprocess: {score_threshold: 0.05, max_detections_per_image: 100}\n";
}

nlohmann::json bench_model(const std::string& name, const std::string& precision, const Args& a,
                           const at::Device& device) {
  const bool seg = name == "deeplabv3";
  const int64_t size = seg ? a.seg_size : a.size;
  const detseg::PipelineConfig config = detseg::parse_config(config_text(name, size), "bench_gpu");
  at::manual_seed(0);
  auto model = detseg::build_model(config);
  model->to(device);
  std::vector<at::Tensor> trainable;
  for (auto& p : model->parameters())
    if (p.requires_grad()) trainable.push_back(p);
  torch::optim::SGD sgd(trainable, torch::optim::SGDOptions(0.001).momentum(0.9));
  const detseg::Batch host = make_batch(a.batch, size, name == "mask_rcnn", seg);
  const detseg::Batch batch = detseg::to_device(host, device, /*non_blocking=*/false);
  const std::string mixed = precision == "bf16" ? "bf16" : "none";

  nlohmann::json out;
  model->train();
  const double train_ms = time_ms(
      [&] {
        detseg::ModelLosses l;
        {
          detseg::AutocastScope autocast(device, mixed);
          l = model->losses(batch);
        }
        sgd.zero_grad();
        l.total.backward();
        sgd.step();
      },
      a.iters, device);
  out["train_ms"] = train_ms;
  out["train_img_s"] = 1000.0 * static_cast<double>(a.batch) / train_ms;
  out["train_peak_mb"] = peak_memory_mb(device);
  if (precision == "fp32" && std::find(a.profile.begin(), a.profile.end(), name) != a.profile.end())
    out["train_profile"] = profile_kernels(
        [&] {
          detseg::ModelLosses l = model->losses(batch);
          sgd.zero_grad();
          l.total.backward();
          sgd.step();
        },
        2, device);
  sgd.zero_grad();

  model->eval();
  at::NoGradGuard no_grad;
  auto* detector = dynamic_cast<detseg::DetectorImpl*>(model.get());
  auto* segmenter = dynamic_cast<detseg::SegmenterImpl*>(model.get());
  const double infer_ms = time_ms(
      [&] {
        detseg::AutocastScope autocast(device, mixed);
        if (segmenter) segmenter->segment(batch);
        if (detector) detector->detect(batch);
      },
      a.iters, device);
  out["infer_ms"] = infer_ms;
  out["infer_img_s"] = 1000.0 * static_cast<double>(a.batch) / infer_ms;
  out["infer_peak_mb"] = peak_memory_mb(device);
  std::fprintf(stderr, "bench_gpu: %s %s train %.1f ms, inference %.1f ms\n", name.c_str(), precision.c_str(),
               train_ms, infer_ms);
  return out;
}

// NMS of 20000 random boxes (IoU 0.5) and RoIAlign of 2000 boxes over an [8, 256, 128, 128]
// feature map to 7x7 (sampling ratio 2, aligned), the sizes of a detector's postprocess and box
// head; forward and backward for RoIAlign. The peer times torchvision.ops on the same inputs' sizes.
nlohmann::json bench_ops(const Args& a, const at::Device& device) {
  at::manual_seed(0);
  const int64_t n = 20000;
  const at::Tensor xy = at::rand({n, 2}) * 1000, wh = at::rand({n, 2}) * 100 + 1;
  const at::Tensor boxes = at::cat({xy, xy + wh}, 1).to(device), scores = at::rand({n}).to(device);
  nlohmann::json out;
  out["nms_20000_ms"] = time_ms([&] { detseg::nms(boxes, scores, 0.5); }, a.iters * 4, device);
  const at::Tensor features = at::randn({8, 256, 128, 128}).to(device).set_requires_grad(true);
  const at::Tensor rois = at::cat({at::randint(0, 8, {2000, 1}).to(at::kFloat), at::cat({xy, xy + wh}, 1).slice(0, 0, 2000) / 2}, 1).to(device);
  detseg::RoiAlignOptions o;
  o.output_size = {7, 7};
  o.spatial_scale = 0.25;
  o.sampling_ratio = 2;
  o.aligned = true;
  {
    at::NoGradGuard no_grad;
    out["roi_align_2000_forward_ms"] = time_ms([&] { detseg::roi_align(features, rois, o); }, a.iters * 4, device);
  }
  out["roi_align_2000_forward_backward_ms"] =
      time_ms([&] { detseg::roi_align(features, rois, o).sum().backward(); }, a.iters * 4, device);
  std::fprintf(stderr, "bench_gpu: nms %.3f ms, roi_align %.3f ms (with backward %.3f ms)\n",
               out["nms_20000_ms"].get<double>(), out["roi_align_2000_forward_ms"].get<double>(),
               out["roi_align_2000_forward_backward_ms"].get<double>());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  detseg::bench::print_machine();
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--device") a.device = value;
    else if (key == "--size") a.size = std::atoll(value.c_str());
    else if (key == "--seg-size") a.seg_size = std::atoll(value.c_str());
    else if (key == "--batch") a.batch = std::atoll(value.c_str());
    else if (key == "--iters") a.iters = std::atoi(value.c_str());
    else if (key == "--models") a.models = split(value);
    else if (key == "--precisions") a.precisions = split(value);
    else if (key == "--profile") a.profile = split(value);
    else {
      std::fprintf(stderr, "bench_gpu: unknown option %s\n", key.c_str());
      return 2;
    }
  }
  try {
    const at::Device device = detseg::resolve_device(a.device);
    // Fixed input sizes: let cuDNN pick its fastest convolution algorithms (the peer does too).
    at::globalContext().setBenchmarkCuDNN(true);
    nlohmann::json out = {{"framework", "detseg"}, {"device", device.str()}, {"size", a.size},
                          {"seg_size", a.seg_size}, {"batch", a.batch}, {"iters", a.iters}};
    int failures = 0;
    // One model failing (out of memory, say) is reported in its entry; the others still run.
    for (const auto& model : a.models) {
      for (const auto& precision : a.precisions) {
        try {
          out["results"][model][precision] = bench_model(model, precision, a, device);
        } catch (const c10::Error& e) {
          out["results"][model][precision] = {{"error", e.what_without_backtrace()}};
          std::fprintf(stderr, "bench_gpu: %s %s failed: %s\n", model.c_str(), precision.c_str(), e.what_without_backtrace());
          ++failures;
        }
      }
    }
    out["ops"] = bench_ops(a, device);
    std::printf("%s\n", out.dump().c_str());
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: %s\n", e.what());
    return 1;
  }
}
