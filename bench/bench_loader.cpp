// Implements: loader throughput (decode + augment + batch, images/s) against torchvision's DataLoader
// doing the same work (bench/peers/bench_loader_torchvision.py), printed as a ratio in one run.
//   bench_loader [--folder DIR] [--epochs N] [--workers N] [--pipeline flip|augment|both|autoaugment] [--no-peer]
// Both sides: bccd JPEGs (640x480), batch 8, 2 workers, intra-op threads 1, normalise, and
//   flip:    keep-aspect resize to 512 + pad, random flip (ours also carries each image's boxes);
//   augment: a train_input.augment list of the demos' kind, with the boxes on both sides:
//            random_horizontal_flip, brightness 0.2 / contrast / saturation 0.8-1.25 / hue 0.02,
//            random_crop_image (min_object_covered 0.1, area 0.3-1), scale_jitter_crop 512 (0.8-1.2);
//            the peer: transforms.v2 RandomHorizontalFlip, ColorJitter, RandomIoUCrop, ScaleJitter +
//            RandomCrop(512, pad_if_needed), SanitizeBoundingBoxes on tv_tensors.BoundingBoxes.
//   autoaugment: flip's pipeline with autoaugment_image (policy v0) after the flip, as EfficientDet
//            trains; detseg only (transforms.v2 has no detection policies): its images/s against
//            flip's tells the step's cost.
#include <ATen/Parallel.h>

#include <opencv2/core.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <regex>
#include <string>

#include "bench_timing.h"
#include "detseg/config/augment_steps.h"
#include "detseg/data/dataset.h"
#include "detseg/data/loader.h"
#include "detseg/data/readers/voc.h"
#include "test_paths.h"

using namespace detseg;

namespace {

std::string run_peer(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char buf[512];
  while (fgets(buf, sizeof buf, pipe)) out += buf;
  pclose(pipe);
  return out;
}

// The "augment" pipeline's list, as a config would give it (sizes already resolved).
std::vector<AugmentStep> augment_list() {
  std::vector<AugmentStep> steps;
  steps.push_back(make_augment_step("random_horizontal_flip"));
  steps.push_back(make_augment_step("random_adjust_brightness").set("max_delta", 0.2));
  steps.push_back(make_augment_step("random_adjust_contrast").set("min_delta", 0.8).set("max_delta", 1.25));
  steps.push_back(make_augment_step("random_adjust_saturation").set("min_delta", 0.8).set("max_delta", 1.25));
  steps.push_back(make_augment_step("random_adjust_hue").set("max_delta", 0.02));
  steps.push_back(
      make_augment_step("random_crop_image").set("min_object_covered", 0.1).set_numbers("area_range", {0.3, 1.0}));
  return steps;
}

// One timed pass; returns images/s.
double run_ours(const DetectionDataset& dataset, const std::string& pipeline, int epochs, int workers) {
  LoaderOptions o;
  o.batch_size = 8;
  o.num_workers = workers;
  o.epochs = epochs;
  o.augment.out_h = o.augment.out_w = 512;
  if (pipeline == "flip" || pipeline == "autoaugment") {
    o.augment.resize = AugmentOptions::Resize::kKeepAspect;
    o.augment.random_flip = true;
    if (pipeline == "autoaugment") o.augment.steps = {make_augment_step("autoaugment_image")};
  } else {
    o.augment.steps = augment_list();
    o.augment.resize = AugmentOptions::Resize::kScaleJitter;
    o.augment.jitter.min_scale = 0.8;
    o.augment.jitter.max_scale = 1.2;
  }
  const auto start = std::chrono::steady_clock::now();
  Loader loader(dataset.size(), [&](int64_t i) { return dataset.get(i); }, o);
  Batch batch;
  int64_t images = 0, boxes = 0;
  while (loader.next(batch)) {
    images += batch.size();
    boxes += batch.num_boxes.sum().item<int64_t>();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double ours = static_cast<double>(images) / seconds;
  std::printf("[%s] detseg images/s: %.1f (%lld images, %lld boxes in %.2f s, batch %lld [%lld, 3, %lld, %lld])\n",
              pipeline.c_str(), ours, static_cast<long long>(images), static_cast<long long>(boxes), seconds,
              static_cast<long long>(o.batch_size), static_cast<long long>(batch.images.size(0)),
              static_cast<long long>(batch.images.size(2)), static_cast<long long>(batch.images.size(3)));
  std::fflush(stdout);
  return ours;
}

}  // namespace

int main(int argc, char** argv) {
  detseg::bench::print_machine();
  std::string voc = std::string(DETSEG_SHARED_DIR) + "/data/bccd/BCCD";
  int epochs = 2, workers = 2;
  bool peer = true;
  std::string which = "both";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--folder") && i + 1 < argc) voc = argv[++i];
    else if (!std::strcmp(argv[i], "--epochs") && i + 1 < argc) epochs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--workers") && i + 1 < argc) workers = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-peer")) peer = false;
    else if (!std::strcmp(argv[i], "--pipeline") && i + 1 < argc) which = argv[++i];
    else {
      std::cerr << "usage: bench_loader [--folder VOC_DIR] [--epochs N] [--workers N] [--pipeline flip|augment|both|autoaugment] "
                   "[--no-peer]\n";
      return 2;
    }
  }
  // Same thread budget as the peer: `workers` threads doing the work, no hidden pools.
  at::set_num_threads(1);
  cv::setNumThreads(0);

  DetectionDatasetOptions d;
  d.image_dir = voc + "/JPEGImages";
  DetectionDataset dataset(read_voc(voc), d);
  std::vector<std::string> pipelines;
  if (which == "flip" || which == "both") pipelines.push_back("flip");
  if (which == "augment" || which == "both") pipelines.push_back("augment");
  if (which == "autoaugment") pipelines = {"flip", "autoaugment"};
  if (pipelines.empty()) {
    std::cerr << "bench_loader: --pipeline takes flip, augment, both or autoaugment\n";
    return 2;
  }
  int failures = 0;
  for (const std::string& pipeline : pipelines) {
    const double ours = run_ours(dataset, pipeline, epochs, workers);
    if (!peer || pipeline == "autoaugment") continue;
    const std::string script = std::string(DETSEG_SOURCE_DIR) + "/bench/peers/bench_loader_torchvision.py";
    const std::string out = run_peer(std::string(DETSEG_PYTHON) + " " + script + " --folder '" + voc + "' --epochs " +
                                     std::to_string(epochs) + " --workers " + std::to_string(workers) +
                                     " --pipeline " + pipeline + " 2>&1");
    std::smatch m;
    if (!std::regex_search(out, m, std::regex("torchvision images/s: ([0-9.]+)"))) {
      std::printf("[%s] torchvision peer failed:\n%s", pipeline.c_str(), out.c_str());
      ++failures;
      continue;
    }
    std::printf("[%s] %s", pipeline.c_str(), out.c_str());
    const double theirs = std::stod(m[1]);
    std::printf("[%s] ratio detseg/torchvision: %.2fx (goal >= 2x)\n", pipeline.c_str(), ours / theirs);
    std::fflush(stdout);
  }
  return failures > 0 ? 1 : 0;
}
