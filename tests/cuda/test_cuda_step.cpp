// GPU check of the training loop's per-step work after the backward (scripts/device_check.sh):
// clipping, the device-side skip of TrainOptimizer::step, the fp16 scaler and StepHealth's record
// must not make the host wait for the GPU. CUDA's sync debug mode is set to "error", so any
// device-to-host read (item(), nonzero, a blocking copy) inside them throws. Each optimizer's CUDA
// update is also compared with the CPU's on the same numbers, and a NaN step must leave the
// weights as they were. Skips without a CUDA device.
#include <c10/cuda/CUDAFunctions.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/optim.h>

#include <cmath>
#include <string>
#include <vector>

#include "detseg/engine/step_health.h"
#include "detseg/train/loss_scaler.h"
#include "detseg/train/optimizer.h"

namespace {

using namespace detseg;

// Sync debug mode "error" for the scope's lifetime.
struct NoHostSyncs {
  NoHostSyncs() { c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_ERROR); }
  ~NoHostSyncs() { c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED); }
};

TEST(CudaStep, UpdateSkipAndRecordMakeNoHostSync) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (const char* type : {"momentum", "adam", "adamw", "rmsprop"}) {
    for (const bool fp16 : {false, true}) {
      const std::string what = std::string(type) + (fp16 ? " fp16" : "");
      torch::manual_seed(5);
      const torch::Tensor start = torch::randn({64, 32, 3, 3});
      std::vector<torch::Tensor> grads = {torch::randn({64, 32, 3, 3}), torch::full({64, 32, 3, 3}, std::nan("")),
                                          torch::randn({64, 32, 3, 3})};
      OptimizerOptions o;
      o.type = type;
      auto make = [&](torch::Tensor& w, const at::Device& device) {
        w = start.to(device).contiguous(torch::MemoryFormat::ChannelsLast).requires_grad_(true);
        ParameterSelection sel;
        sel.trainable.push_back({"w", w});
        return build_optimizer(sel, o, 0.01);
      };
      torch::Tensor w_cpu, w_gpu;
      TrainOptimizer cpu = make(w_cpu, at::kCPU), gpu = make(w_gpu, at::kCUDA);
      LossScaler scaler(at::kCUDA);
      StepHealth health(fp16);
      for (size_t i = 0; i < grads.size(); ++i) {
        // CPU: the same clipping and update, in fp32.
        w_cpu.mutable_grad() = grads[i].clone();
        cpu.step(clip_gradients_by_global_norm_async({w_cpu}, 10.0).isfinite().logical_not().to(at::kFloat));
        // As if the loss had been multiplied by the scaler's current scale (a power of two: exact).
        w_gpu.mutable_grad() = (fp16 ? grads[i] * scaler.current_scale() : grads[i]).to(at::kCUDA);
        const torch::Tensor before = w_gpu.detach().clone();
        torch::Tensor skipped;
        {
          NoHostSyncs guard;
          const at::Tensor found_inf = fp16 ? scaler.unscale_gradients({w_gpu}) : at::Tensor();
          const at::Tensor norm = clip_gradients_by_global_norm_async({w_gpu}, 10.0).to(w_gpu.device());
          skipped = norm.isfinite().logical_not().to(at::kFloat);
          gpu.step(skipped);
          if (fp16) scaler.update(found_inf);
          const at::Tensor loss = w_gpu.detach().sum();
          health.record(static_cast<int64_t>(i) + 1, loss, norm, loss * 0, {{"part", loss}}, skipped);
        }
        if (i == 1) {
          EXPECT_TRUE(torch::equal(w_gpu.detach(), before)) << what << ": the NaN step moved the weights";
        }
        EXPECT_LE((w_gpu.detach().cpu() - w_cpu.detach()).abs().max().item<double>(), 1e-5) << what << " step " << i;
      }
      const StepHealth::Reading r = health.read();
      EXPECT_EQ(r.skipped_steps, 1) << what;
      EXPECT_EQ(r.failed_step, fp16 ? -1 : 2) << what;  // fp16: one overflow is not a failure
      gpu.sync_state();
    }
  }
}

}  // namespace
