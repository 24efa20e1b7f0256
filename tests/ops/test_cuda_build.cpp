// Implements: the build-configuration test of the CUDA kernels: a library configured with
// DETSEG_WITH_CUDA holds them (runs anywhere), and a CUDA tensor reaches them or, in a build
// without them, fails with a clear error (needs a CUDA device; skipped without one).
#include "detseg/core/error.h"
#include "detseg/ops/cuda_kernels.h"
#include "detseg/ops/nms.h"
#include "ops/ops_test_util.h"

using namespace detseg;
using namespace detseg::testing;

TEST(CudaBuild, KernelsPresentExactlyWhenConfigured) {
#ifdef DETSEG_WITH_CUDA
  EXPECT_TRUE(cuda_kernels_built());
#else
  EXPECT_FALSE(cuda_kernels_built());
#endif
}

TEST(CudaBuild, CudaTensorsReachTheKernelsOrAClearError) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: no CUDA tensor can be made";
  auto boxes = F({0, 0, 10, 10, 1, 1, 11, 11}, {2, 4}).to(at::kCUDA);
  auto scores = F({0.9f, 0.8f}, {2}).to(at::kCUDA);
  if (cuda_kernels_built()) {
    auto keep = nms(boxes, scores, 0.5);
    EXPECT_TRUE(keep.is_cuda());
    EXPECT_EQ(to_vec(keep), (std::vector<int64_t>{0}));
  } else {
    try {
      nms(boxes, scores, 0.5);
      ADD_FAILURE() << "expected detseg::Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("built without CUDA kernels"), std::string::npos);
    }
  }
}
