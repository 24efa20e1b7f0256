// Device choice (--device / the config's `device`) on a machine without a GPU, and the autocast
// scope of train.mixed_precision on the CPU.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <ATen/Version.h>

#include <cstdlib>
#include <map>

#include "command_runner.h"
#include "detseg/config/config.h"
#include "detseg/core/cpu_info.h"
#include "detseg/core/error.h"
#include "detseg/data/loader.h"
#include "detseg/engine/device.h"
#include "test_paths.h"

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

// The machine line names the oneDNN ISA that oneDNN itself reports (ONEDNN_VERBOSE, from a oneDNN
// convolution in the venv's torch, the same oneDNN build) under each cap this CPU can take, and
// ATen's own capability.
TEST(Device, MachineLineNamesTheKernelSetsInUse) {
  const std::string summary = detseg::machine_summary();
  EXPECT_NE(summary.find("ATen CPU capability " + at::get_cpu_capability()), std::string::npos) << summary;
  EXPECT_NE(summary.find(detseg::cpu_model_name()), std::string::npos) << summary;
  if (std::getenv("ATEN_CPU_CAPABILITY") == nullptr) {
    EXPECT_EQ(at::get_cpu_capability(), detseg::aten_native_cpu_capability());
  }
  // oneDNN's names in its verbose "isa:" field.
  const std::map<std::string, std::string> verbose = {
      {"sse41", "Intel SSE4.1"}, {"avx", "Intel AVX"}, {"avx2", "Intel AVX2"},
      {"avx2_vnni", "Intel AVX2 with Intel DL Boost"},
      {"avx2_vnni_2", "Intel AVX2 with Intel DL Boost, float16 and bfloat16 support"},
      {"avx512_core", "Intel AVX-512 with AVX512BW, AVX512VL, and AVX512DQ extensions"},
      {"avx512_core_vnni", "Intel AVX-512 with Intel DL Boost"},
      {"avx512_core_bf16", "Intel AVX-512 with Intel DL Boost and bfloat16 support"}};
  // Our answer reads the variable at each call; oneDNN reads it once per process (Python's).
  struct RestoreCap {
    std::string value = std::getenv("ONEDNN_MAX_CPU_ISA") ? std::getenv("ONEDNN_MAX_CPU_ISA") : "";
    ~RestoreCap() { value.empty() ? unsetenv("ONEDNN_MAX_CPU_ISA") : setenv("ONEDNN_MAX_CPU_ISA", value.c_str(), 1); }
  } restore;
  int checked = 0;
  for (const std::string cap : {"", "SSE41", "AVX2"}) {  // a Python start each
    cap.empty() ? unsetenv("ONEDNN_MAX_CPU_ISA") : setenv("ONEDNN_MAX_CPU_ISA", cap.c_str(), 1);
    const std::string ours = detseg::onednn_cpu_isa();
    const auto run = detseg::testing::run_command(
        "ONEDNN_VERBOSE=1 " + std::string(DETSEG_PYTHON) +
        " -c 'import torch; torch.ops.aten.mkldnn_convolution(torch.randn(1, 16, 32, 32), torch.randn(16, 16, 3, 3),"
        " None, [1, 1], [1, 1], [1, 1], 1)' | grep -o 'isa:[^,]*' | head -1");
    if (run.output.empty()) GTEST_SKIP() << DETSEG_PYTHON << " without torch: oneDNN's own answer not checked";
    if (!verbose.count(ours)) continue;  // an ISA this table does not spell (AVX10, AMX)
    EXPECT_EQ(run.output, "isa:" + verbose.at(ours) + "\n") << "ONEDNN_MAX_CPU_ISA=" << cap << ", ours " << ours;
    ++checked;
  }
  EXPECT_GE(checked, 1);
}
