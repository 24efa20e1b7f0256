// Device choice (--device / the config's `device`) on a machine without a GPU, and the autocast
// scope of train.mixed_precision on the CPU.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdlib>

#include "command_runner.h"
#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/data/loader.h"
#include "detseg/engine/device.h"

namespace {

TEST(Device, CpuAndAutoWithoutAGpu) {
  EXPECT_TRUE(detseg::resolve_device("cpu").is_cpu());
  if (torch::cuda::is_available()) {
    EXPECT_TRUE(detseg::resolve_device("auto").is_cuda());
    EXPECT_TRUE(detseg::resolve_device("cuda:0").is_cuda());
    return;
  }
  EXPECT_TRUE(detseg::resolve_device("auto").is_cpu());
  try {
    detseg::resolve_device("cuda:0");
    FAIL() << "cuda:0 resolved without a GPU";
  } catch (const detseg::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("device cuda:0: no CUDA GPU"), std::string::npos) << e.what();
  }
}

TEST(Device, ConfigRejectsMalformedDevices) {
  EXPECT_EQ(detseg::parse_config("model: {num_classes: 2}\ndevice: cuda:1\n", "x.yaml").device, "cuda:1");
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CPU"})
    EXPECT_THROW(detseg::parse_config("model: {num_classes: 2}\n", "x.yaml", {std::string("device=") + bad}),
                 detseg::ConfigError)
        << bad;
}

TEST(Device, CommandLineDeviceCudaWithoutAGpuIsAOneLineUsageError) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "this machine has a GPU";
  const std::string config = std::string(DETSEG_SOURCE_DIR) + "/configs/demo/retinanet_r18_bccd.yaml";
  const auto r = detseg::testing::run_command(std::string(DETSEG_BINARY) + " train --config " + config +
                                              " --model-dir /tmp/detseg_device_test --device cuda");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.output, "detseg: error: device cuda: no CUDA GPU or driver is visible to this build; use --device cpu\n");
}

TEST(Device, AutocastScopeRunsMatmulsInBf16AndRestores) {
  const at::Tensor a = at::randn({4, 4}), b = at::randn({4, 4});
  {
    detseg::AutocastScope autocast(at::Device(at::kCPU), "bf16");
    EXPECT_EQ(at::mm(a, b).scalar_type(), at::kBFloat16);
  }
  EXPECT_EQ(at::mm(a, b).scalar_type(), at::kFloat);
  {
    detseg::AutocastScope off(at::Device(at::kCPU), "none");
    EXPECT_EQ(at::mm(a, b).scalar_type(), at::kFloat);
  }
}

TEST(Device, CpuBatchesStayWhereTheyAre) {
  detseg::Batch b;
  b.images = at::rand({1, 3, 4, 4});
  b.image_sizes = at::full({1, 2}, 4, at::kLong);
  const detseg::Batch moved = detseg::to_device(b, at::Device(at::kCPU));
  EXPECT_TRUE(moved.images.is_same(b.images));  // no copy on the CPU
}

}  // namespace
