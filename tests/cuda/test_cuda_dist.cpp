// GPU check of the distributed backends (scripts/device_check.sh): a one-process group with NCCL
// beside Gloo routes each collective by the tensor's device. One GPU cannot host two NCCL ranks
// (NCCL refuses two ranks on one device), so the two-process runs of tests/dist stay on Gloo; this
// proves that NCCL initialises, reduces and broadcasts CUDA tensors, and that CPU control
// messages still go through Gloo in the same group.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <chrono>

#include "detseg/dist/launch.h"
#include "detseg/dist/process_group.h"

namespace {

using namespace detseg;

TEST(CudaDist, NcclTakesCudaTensorsAndGlooTheCpuOnes) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  ASSERT_TRUE(dist::use_nccl("auto", at::Device("cuda:0"))) << "this build has no NCCL (nccl.h not found by CMake)";
  dist::Environment env;
  env.master_port = dist::pick_free_port();
  dist::ProcessGroup group(env, std::chrono::seconds(60), /*with_nccl=*/true);
  EXPECT_EQ(group.backend(), "nccl (CUDA tensors) + gloo (CPU)");

  at::Tensor gpu = at::arange(6, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
  group.all_reduce_sum(gpu);  // one rank: the sum is the tensor itself, on the GPU
  EXPECT_TRUE(gpu.is_cuda());
  EXPECT_TRUE(at::equal(gpu.cpu(), at::arange(6, at::kFloat)));
  std::vector<at::Tensor> sent{gpu * 2, at::ones({3}, at::kLong)};
  group.broadcast(sent, 0);
  EXPECT_TRUE(at::equal(sent[0].cpu(), at::arange(6, at::kFloat) * 2));
  EXPECT_TRUE(at::equal(sent[1], at::ones({3}, at::kLong)));

  at::Tensor cpu = at::tensor({1.5, 2.5}, at::kDouble);
  group.all_reduce_sum(cpu);
  EXPECT_TRUE(at::equal(cpu, at::tensor({1.5, 2.5}, at::kDouble)));
  EXPECT_EQ(group.all_gather_bytes("rank zero"), std::vector<std::string>{"rank zero"});
  group.barrier();
}

}  // namespace
