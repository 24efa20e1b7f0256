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
// the flattened parameters. Under WORLD_SIZE=2 each rank starts from a different seed, so equal
// results also show the broadcast of rank 0's weights.
std::vector<float> train_tiny(int64_t batch_size) {
  detseg::DistributedConfig dc;
  dc.timeout_s = 30;
  dc.bucket_mb = 0.0002;  // ~200 bytes: the 4 tensors land in several buckets
  detseg::dist::DataParallel dp(dc);
  at::manual_seed(static_cast<uint64_t>(7 + 100 * dp.rank()));
  torch::nn::Sequential net(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).padding(1)), torch::nn::ReLU(),
                            torch::nn::Flatten(), torch::nn::Linear(64, 1));
  dp.broadcast_module(*net);
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
  for (auto& p : params) {
    at::Tensor c = p.detach().contiguous().view({-1});
    flat.insert(flat.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return flat;
}

}  // namespace

// The worker half: runs only inside the processes the test below starts.
TEST(DataParallelWorker, TinyModel) {
  const char* out = std::getenv("DETSEG_TEST_DIST_OUT");
  if (out == nullptr) GTEST_SKIP() << "worker of DataParallel.TwoProcessesBatchOneEqualOneProcessBatchTwo";
  std::vector<float> flat = train_tiny(1);
  std::ofstream(out, std::ios::binary).write(reinterpret_cast<const char*>(flat.data()),
                                             static_cast<std::streamsize>(flat.size() * sizeof(float)));
}

TEST(DataParallel, TwoProcessesBatchOneEqualOneProcessBatchTwo) {
  const std::vector<float> single = train_tiny(2);
  const fs::path dir = fs::temp_directory_path() / "detseg_test_dist_tiny";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const int port = detseg::dist::pick_free_port();
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", "2", 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("DETSEG_TEST_DIST_OUT", (dir / ("rank" + std::to_string(r) + ".bin")).c_str(), 1);
      char filter[] = "--gtest_filter=DataParallelWorker.TinyModel";
      char* argv[] = {const_cast<char*>("test_dist"), filter, nullptr};
      ::execv("/proc/self/exe", argv);
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "worker status " << status;
  }
  for (int r = 0; r < 2; ++r) {
    std::ifstream in(dir / ("rank" + std::to_string(r) + ".bin"), std::ios::binary);
    std::vector<float> got(single.size());
    in.read(reinterpret_cast<char*>(got.data()), static_cast<std::streamsize>(got.size() * sizeof(float)));
    ASSERT_TRUE(in.good()) << "rank " << r << " wrote no parameters";
    double max_diff = 0;
    for (size_t k = 0; k < got.size(); ++k) max_diff = std::max(max_diff, std::abs(double(got[k]) - single[k]));
    std::printf("rank %d: max |diff| to 1 process x batch 2 after %d steps: %.3g\n", r, kSteps, max_diff);
    EXPECT_LT(max_diff, 1e-5) << "rank " << r;
  }
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
