// Data-parallel training on c10d (Gloo over loopback): two processes with batch 1 take exactly the
// steps one process with batch 2 takes (same examples per global batch, averaged gradients, rank
// 0's initial weights), through the real DataParallel, GradientAverager (several buckets) and
// Loader sharding. The worker processes are this test program re-run with torchrun's variables.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/activation.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/optim/sgd.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "detseg/data/loader.h"
#include "detseg/dist/data_parallel.h"
#include "detseg/dist/launch.h"
#include "detseg/models/layers/frozen_batch_norm.h"
#include "error_of.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace {

constexpr int kSteps = 6;  // 8 examples, global batch 2: crosses an epoch (reshuffle) boundary

detseg::Example tiny_example(int64_t i) {
  detseg::Example e;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(1000 + i));
  e.image = at::randint(0, 256, {3, 4, 4}, gen, at::kByte);
  e.boxes = at::tensor({0.f, 0.f, 2.f, 2.f}).view({1, 4});
  e.classes = at::zeros({1}, at::kLong);
  e.iscrowd = at::zeros({1}, at::kBool);
  e.image_id = i;
  e.original_height = e.original_width = 4;
  return e;
}

// Trains a conv + linear regressor kSteps steps with plain SGD on a mean-over-batch loss; returns
// the flattened parameters (then, with batch norm, its running statistics). Under WORLD_SIZE=2
// each rank starts from a different seed, so equal results also show the broadcast of rank 0's
// weights. `batch_norm`: a trainable batch norm after the conv, synchronised across ranks when
// `sync_bn`.
std::vector<float> train_tiny(int64_t batch_size, bool batch_norm = false, bool sync_bn = false) {
  detseg::DistributedConfig dc;
  dc.timeout_s = 30;
  dc.bucket_mb = 0.0002;  // ~200 bytes: the tensors land in several buckets
  dc.sync_batch_norm = sync_bn;
  detseg::dist::DataParallel dp(dc);
  at::manual_seed(static_cast<uint64_t>(7 + 100 * dp.rank()));
  torch::nn::Sequential net(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).padding(1)));
  if (batch_norm) net->push_back(detseg::Norm2d(detseg::Norm2dOptions(4)));
  net->push_back(torch::nn::ReLU());
  net->push_back(torch::nn::Flatten());
  net->push_back(torch::nn::Linear(64, 1));
  dp.broadcast_module(*net);
  EXPECT_EQ(dp.synchronise_batch_norm(*net), sync_bn && dp.world_size() > 1 ? 1 : 0);
  std::vector<at::Tensor> params = net->parameters();
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.05));
  dp.attach(params);

  detseg::LoaderOptions lo;
  lo.batch_size = batch_size;
  lo.num_workers = 0;
  lo.shuffle = true;
  lo.seed = 11;
  lo.epochs = 0;
  lo.rank = dp.rank();
  lo.world_size = dp.world_size();
  lo.augment.resize = detseg::AugmentOptions::Resize::kNone;
  detseg::Loader loader(8, tiny_example, lo);
  for (int step = 0; step < kSteps; ++step) {
    detseg::Batch batch;
    EXPECT_TRUE(loader.next(batch));
    std::vector<float> targets;
    for (int64_t id : batch.image_ids) targets.push_back(static_cast<float>(id % 3));
    at::Tensor y = at::tensor(targets);
    sgd.zero_grad();
    at::Tensor loss = (net->forward(batch.images).squeeze(1) - y).pow(2).mean();
    loss.backward();
    dp.average_gradients();
    sgd.step();
  }
  std::vector<float> flat;
  std::vector<at::Tensor> state = params;
  for (auto& b : net->buffers())
    if (b.is_floating_point()) state.push_back(b);
  for (auto& p : state) {
    at::Tensor c = p.detach().contiguous().view({-1});
    flat.insert(flat.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return flat;
}

// Runs the DataParallelWorker.TinyModel test in 2 processes (this program, torchrun's variables)
// with DETSEG_TEST_DIST_BN=`bn` and returns each rank's flattened result.
std::vector<std::vector<float>> run_two_workers(const std::string& name, const std::string& bn, size_t size) {
  const detseg::testing::TempDir dir_temp("test_dist_tiny");
  const fs::path dir = dir_temp.path();
  fs::create_directories(dir);
  const int port = detseg::dist::pick_free_port();
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    fs::remove(dir / (name + std::to_string(r) + ".bin"));
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", "2", 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("DETSEG_TEST_DIST_OUT", (dir / (name + std::to_string(r) + ".bin")).c_str(), 1);
      ::setenv("DETSEG_TEST_DIST_BN", bn.c_str(), 1);
      char filter[] = "--gtest_filter=DataParallelWorker.TinyModel";
      char* argv[] = {const_cast<char*>("test_dist"), filter, nullptr};
      ::execv("/proc/self/exe", argv);
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  std::vector<std::vector<float>> results;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "worker status " << status;
  }
  for (int r = 0; r < 2; ++r) {
    std::ifstream in(dir / (name + std::to_string(r) + ".bin"), std::ios::binary);
    std::vector<float> got(size);
    in.read(reinterpret_cast<char*>(got.data()), static_cast<std::streamsize>(got.size() * sizeof(float)));
    EXPECT_TRUE(in.good()) << "rank " << r << " wrote no parameters";
    results.push_back(got);
  }
  return results;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t k = 0; k < a.size() && k < b.size(); ++k) m = std::max(m, std::abs(double(a[k]) - b[k]));
  return m;
}

}  // namespace

// The worker half: runs only inside the processes the test below starts.
TEST(DataParallelWorker, TinyModel) {
  const char* out = std::getenv("DETSEG_TEST_DIST_OUT");
  if (out == nullptr) GTEST_SKIP() << "worker of DataParallel.TwoProcessesBatchOneEqualOneProcessBatchTwo";
  const std::string bn = std::getenv("DETSEG_TEST_DIST_BN") ? std::getenv("DETSEG_TEST_DIST_BN") : "";
  std::vector<float> flat = train_tiny(1, !bn.empty(), bn == "sync");
  std::ofstream(out, std::ios::binary).write(reinterpret_cast<const char*>(flat.data()),
                                             static_cast<std::streamsize>(flat.size() * sizeof(float)));
}

TEST(DataParallel, TwoProcessesBatchOneEqualOneProcessBatchTwo) {
  const std::vector<float> single = train_tiny(2);
  std::vector<std::vector<float>> ranks = run_two_workers("plain", "", single.size());
  for (int r = 0; r < 2; ++r) {
    const double max_diff = max_abs_diff(ranks[static_cast<size_t>(r)], single);
    std::printf("rank %d: max |diff| to 1 process x batch 2 after %d steps: %.3g\n", r, kSteps, max_diff);
    EXPECT_LT(max_diff, 1e-5) << "rank " << r;
  }
}

// With a trainable batch norm, 2 processes x batch 1 equal 1 process x batch 2 (weights and running
// statistics) only when the batch norm is synchronised: with local batch norm each rank normalises
// its one image by itself, and the weights come out different.
TEST(DataParallel, SyncBatchNormTwoProcessesEqualOneProcessBatchTwo) {
  const std::vector<float> single = train_tiny(2, /*batch_norm=*/true);
  std::vector<std::vector<float>> synced = run_two_workers("sync", "sync", single.size());
  std::vector<std::vector<float>> local = run_two_workers("local", "local", single.size());
  const double sync_diff = std::max(max_abs_diff(synced[0], single), max_abs_diff(synced[1], single));
  const double local_diff = max_abs_diff(local[0], single);
  std::printf("batch norm after %d steps, max |diff| to 1 process x batch 2: synchronised %.3g, local %.3g\n",
              kSteps, sync_diff, local_diff);
  EXPECT_LT(sync_diff, 1e-5);
  EXPECT_GT(local_diff, 1e-3);
}

// One replica: sync_batch_norm is at::batch_norm in training mode, output, running statistics and
// gradients (x, weight, bias).
TEST(DataParallel, SyncBatchNormOneReplicaEqualsBatchNorm) {
  at::manual_seed(3);
  at::Tensor x = (at::randn({2, 3, 5, 4}) * 2 + 1).requires_grad_();
  at::Tensor w = at::rand({3}).add_(0.5).requires_grad_(), b = at::randn({3}).requires_grad_();
  at::Tensor rm1 = at::randn({3}), rv1 = at::rand({3}).add_(0.5), rm2 = rm1.clone(), rv2 = rv1.clone();
  at::Tensor upstream = at::randn({2, 3, 5, 4});
  int calls = 0;
  detseg::ReplicaSum sum = [&](at::Tensor&) { ++calls; };
  at::Tensor y1 = detseg::sync_batch_norm(x, w, b, rm1, rv1, 0.1, 1e-5, sum);
  auto g1 = torch::autograd::grad({(y1 * upstream).sum()}, {x, w, b});
  at::Tensor y2 = at::batch_norm(x, w, b, rm2, rv2, true, 0.1, 1e-5, false);
  auto g2 = torch::autograd::grad({(y2 * upstream).sum()}, {x, w, b});
  EXPECT_EQ(calls, 2);  // one all-reduce in forward, one in backward
  EXPECT_TRUE(at::allclose(y1, y2, 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(rm1, rm2, 1e-6, 1e-6));
  EXPECT_TRUE(at::allclose(rv1, rv2, 1e-5, 1e-5));
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(at::allclose(g1[i], g2[i], 1e-4, 1e-5)) << i;
}

// Hand-worked: 10 examples, saved 2 ranks x batch 1 (5 batches per rank and epoch). Step 7 is
// epoch 1, 2 batches in = 4 examples of that epoch consumed.
TEST(DataParallel, ResumeStartBatchForAnotherWorldSize) {
  using detseg::dist::resume_start_batch;
  EXPECT_EQ(resume_start_batch(7, 2, 1, 10, 2, 1, false), 7);  // same world: the step itself
  EXPECT_EQ(resume_start_batch(7, 2, 1, 10, 1, 2, false), 7);  // same global batch 2: 5 per epoch
  EXPECT_EQ(resume_start_batch(7, 2, 1, 10, 1, 1, false), 14); // 1 x 1: 10 per epoch, 10 + 4
  EXPECT_EQ(resume_start_batch(7, 2, 1, 10, 4, 1, false), 4);  // 4 x 1: 3 per epoch (ceil 10/4), 3 + ceil(4/4)
  EXPECT_EQ(resume_start_batch(7, 2, 1, 10, 1, 3, false), 6);  // 1 x 3: 4 per epoch, 4 + ceil(4/3)
  EXPECT_EQ(resume_start_batch(0, 2, 1, 10, 1, 1, false), 0);
}

// train.distributed.backend: Gloo takes CPU tensors always; auto adds NCCL for a CUDA run where
// this build has it (the NCCL collectives themselves: tests/cuda/test_cuda_dist.cpp on the GPU).
TEST(DataParallel, BackendChoiceFollowsTheDevice) {
  using detseg::dist::use_nccl;
  const at::Device cpu(at::kCPU), cuda("cuda:0");
  EXPECT_FALSE(use_nccl("auto", cpu));
  EXPECT_FALSE(use_nccl("gloo", cpu));
  EXPECT_FALSE(use_nccl("gloo", cuda));
  EXPECT_EQ(detseg::testing::error_of<detseg::ConfigError>([&] { use_nccl("nccl", cpu); }),
            "train.distributed.backend: nccl runs on CUDA devices; this run trains on cpu (use gloo or auto)");
  // On a CUDA run, nccl is taken exactly when auto would take it; otherwise it is refused in one line.
  const std::string refused = detseg::testing::error_of<detseg::ConfigError>([&] { use_nccl("nccl", cuda); });
  if (use_nccl("auto", cuda))
    EXPECT_EQ(refused, "");
  else
    EXPECT_EQ(refused, "train.distributed.backend: nccl: this detseg was built without NCCL (nccl.h was not found "
                       "at configure time); use gloo or auto");
  // The choice is checked when the run starts, in one process too.
  detseg::DistributedConfig dc;
  dc.backend = "nccl";
  EXPECT_THROW(detseg::dist::DataParallel(dc, cpu), detseg::ConfigError);
}
