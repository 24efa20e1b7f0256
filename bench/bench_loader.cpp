// Implements: loader throughput (decode + augment + batch, images/s) against torchvision's DataLoader
// doing the same work (bench/peers/bench_loader_torchvision.py), printed as a ratio in one run.
//   bench_loader [--folder DIR] [--epochs N] [--workers N] [--no-peer]
// Both sides: bccd JPEGs (640x480), keep-aspect resize to 512 + pad, random flip, normalise,
// batch 8, 2 workers, intra-op threads 1. Ours also carries and transforms each image's boxes.
#include <ATen/Parallel.h>

#include <opencv2/core.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <regex>
#include <string>

#include "bench_timing.h"
#include "detseg/data/dataset.h"
#include "detseg/data/loader.h"
#include "detseg/data/readers/voc.h"

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

}  // namespace

int main(int argc, char** argv) {
  detseg::bench::print_machine();
  std::string voc = std::string(DETSEG_SHARED_DIR) + "/data/bccd/BCCD";
  int epochs = 2, workers = 2;
  bool peer = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--folder") && i + 1 < argc) voc = argv[++i];
    else if (!std::strcmp(argv[i], "--epochs") && i + 1 < argc) epochs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--workers") && i + 1 < argc) workers = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-peer")) peer = false;
    else {
      std::cerr << "usage: bench_loader [--folder VOC_DIR] [--epochs N] [--workers N] [--no-peer]\n";
      return 2;
    }
  }
  // Same thread budget as the peer: `workers` threads doing the work, no hidden pools.
  at::set_num_threads(1);
  cv::setNumThreads(0);

  DetectionDatasetOptions d;
  d.image_dir = voc + "/JPEGImages";
  DetectionDataset dataset(read_voc(voc), d);
  LoaderOptions o;
  o.batch_size = 8;
  o.num_workers = workers;
  o.epochs = epochs;
  o.augment.resize = AugmentOptions::Resize::kKeepAspect;
  o.augment.out_h = o.augment.out_w = 512;
  o.augment.random_flip = true;

  const auto start = std::chrono::steady_clock::now();
  Loader loader(dataset.size(), [&](int64_t i) { return dataset.get(i); }, o);
  Batch batch;
  int64_t images = 0;
  while (loader.next(batch)) images += batch.size();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double ours = static_cast<double>(images) / seconds;
  std::printf("detseg images/s: %.1f (%lld images in %.2f s, batch %lld [%lld, 3, %lld, %lld])\n", ours,
              static_cast<long long>(images), seconds, static_cast<long long>(o.batch_size),
              static_cast<long long>(batch.images.size(0)), static_cast<long long>(batch.images.size(2)),
              static_cast<long long>(batch.images.size(3)));
  std::fflush(stdout);
  if (!peer) return 0;

  const std::string script = std::string(DETSEG_SOURCE_DIR) + "/bench/peers/bench_loader_torchvision.py";
  const std::string out = run_peer(std::string(DETSEG_PYTHON) + " " + script + " --folder '" + voc + "/JPEGImages' --epochs " +
                                   std::to_string(epochs) + " --workers " + std::to_string(workers) + " 2>&1");
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("torchvision images/s: ([0-9.]+)"))) {
    std::printf("torchvision peer failed:\n%s", out.c_str());
    return 1;
  }
  std::printf("%s", out.c_str());
  const double theirs = std::stod(m[1]);
  std::printf("ratio detseg/torchvision: %.2fx (goal >= 2x)\n", ours / theirs);
  return 0;
}
