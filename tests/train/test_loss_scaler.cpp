// The fp16 loss scaler against torch.amp.GradScaler's rules (scale, unscale with the overflow flag,
// back-off on overflow, growth after growth_interval clean steps), its state in a checkpoint's
// "loop" section, and the device-free global-norm clipping the training loop uses.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "detseg/train/checkpoint.h"
#include "detseg/train/loss_scaler.h"
#include "detseg/train/optimizer.h"
#include "temp_dir.h"

namespace {

using detseg::LossScaler;
using detseg::LossScalerOptions;

at::Tensor with_grad(const at::Tensor& value, const at::Tensor& grad) {
  at::Tensor p = value.clone().set_requires_grad(true);
  p.mutable_grad() = grad.clone();
  return p;
}

TEST(LossScaler, ScalesUnscalesAndAdaptsLikeGradScaler) {
  LossScalerOptions o;
  o.init_scale = 1024;
  o.growth_interval = 2;
  LossScaler scaler(at::Device(at::kCPU), o);
  EXPECT_DOUBLE_EQ(scaler.scale(at::tensor({0.5f})).item<double>(), 512.0);

  at::Tensor a = with_grad(at::zeros({2}), at::tensor({2048.f, -1024.f}));
  at::Tensor b = with_grad(at::zeros({1}), at::tensor({512.f}));
  at::Tensor found = scaler.unscale_gradients({a, b});
  EXPECT_EQ(found.item<float>(), 0.f);
  EXPECT_TRUE(at::equal(a.grad(), at::tensor({2.f, -1.f})));
  EXPECT_TRUE(at::equal(b.grad(), at::tensor({0.5f})));
  scaler.update(found);  // clean step 1 of 2: unchanged
  EXPECT_DOUBLE_EQ(scaler.current_scale(), 1024.0);
  scaler.update(found);  // clean step 2 of 2: doubled
  EXPECT_DOUBLE_EQ(scaler.current_scale(), 2048.0);

  b.mutable_grad() = at::tensor({std::numeric_limits<float>::infinity()});
  found = scaler.unscale_gradients({a, b});
  EXPECT_EQ(found.item<float>(), 1.f);
  scaler.update(found);  // overflow: halved, clean count reset
  EXPECT_DOUBLE_EQ(scaler.current_scale(), 1024.0);
}

TEST(LossScaler, StateTravelsInTheCheckpointLoopSection) {
  LossScalerOptions o;
  o.init_scale = 4096;
  o.growth_interval = 3;
  LossScaler scaler(at::Device(at::kCPU), o);
  scaler.update(at::zeros({1}));  // one clean step counted
  detseg::Checkpoint c;
  c.step = 5;
  c.loop = scaler.state();
  const detseg::testing::TempDir path_temp("loss_scaler");
  const std::string path = (path_temp / "loss_scaler.dsckpt").string();
  detseg::write_checkpoint(path, c);
  const detseg::Checkpoint back = detseg::read_checkpoint(path);
  std::filesystem::remove(path);

  LossScaler resumed(at::Device(at::kCPU), LossScalerOptions{});
  resumed.load(back.loop);
  EXPECT_DOUBLE_EQ(resumed.current_scale(), 4096.0);
  // The clean-step count came back too: two more clean steps make 3.
  for (int i = 0; i < 2; ++i) resumed.update(at::zeros({1}));
  EXPECT_TRUE(at::equal(resumed.state()[1].second, at::tensor({3}, at::kInt)));
}

TEST(GradientClipping, AsyncNormMatchesTheHostNormAndClipsTheSame) {
  at::Tensor a = with_grad(at::zeros({2}), at::tensor({3.f, 4.f}));
  at::Tensor b = with_grad(at::zeros({1}), at::tensor({12.f}));
  const at::Tensor norm = detseg::clip_gradients_by_global_norm_async({a, b}, 6.5);
  EXPECT_EQ(norm.dim(), 0);
  EXPECT_DOUBLE_EQ(norm.item<double>(), 13.0);
  EXPECT_TRUE(at::allclose(a.grad(), at::tensor({1.5f, 2.f})));
  EXPECT_TRUE(at::allclose(b.grad(), at::tensor({6.f})));
  // A non-finite norm leaves the gradients as they are.
  b.mutable_grad() = at::tensor({std::nanf("")});
  EXPECT_TRUE(std::isnan(detseg::clip_gradients_by_global_norm_async({a, b}, 1.0).item<double>()));
  EXPECT_TRUE(at::allclose(a.grad(), at::tensor({1.5f, 2.f})));
}

}  // namespace
