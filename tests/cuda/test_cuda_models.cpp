// GPU checks of the models and the training state (run by scripts/device_check.sh on the GPU
// machine; without a CUDA device they skip, except the mixed-precision steps, which run bf16 on the
// CPU): one training forward of every model type on CUDA against the CPU with the same weights and
// batch, bf16/fp16 training steps, and a checkpoint written from CUDA tensors restored on the CPU.
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/optim/sgd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "detseg/config/config.h"
#include "detseg/data/loader.h"
#include "detseg/engine/device.h"
#include "detseg/models/build.h"
#include "detseg/train/checkpoint.h"
#include "detseg/train/loss_scaler.h"
#include "detseg/train/optimizer.h"
#include "temp_dir.h"

namespace {

using namespace detseg;

#define SKIP_WITHOUT_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device"

// TF32 convolutions (cuDNN's default) round to 10-bit mantissas: enough to move proposal scores
// across the top-k cut. The CPU comparison runs in full fp32.
void full_fp32_on_cuda() {
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setAllowTF32CuBLAS(false);
}

// Small configs of every model type. The two-stage samplers are sized to take every candidate, so
// the CPU and CUDA random streams (which differ) do not change which anchors and proposals count.
std::string config_text(const std::string& type) {
  if (type == "deeplabv3plus")
    return "model: {type: deeplabv3plus, backbone: resnet18, num_classes: 5, frozen_batch_norm: false,\n"
           "        deeplab: {output_stride: 16, crop_size: 128, aspp_channels: 32, decoder_channels: 32,\n"
           "                  aspp_dropout: 0.0}}\n";  // dropout masks would differ: the RNGs differ
  if (type == "efficientdet") return "model: {type: efficientdet, efficientdet: d0, num_classes: 5, image_size: 128}\n";
  std::string text = "model: {type: " + type + ", backbone: resnet18, num_classes: 5, image_size: 128, fpn_channels: 32";
  if (type != "retinanet")
    text += ",\n  faster_rcnn: {number_of_stages: " + std::string(type == "mask_rcnn" ? "3" : "2") +
            ", first_stage_minibatch_size: 100000, first_stage_max_proposals: 64, second_stage_batch_size: 100000,\n"
            "    first_stage_box_predictor_depth: 32, representation_size: 64}";
  return text + "}\npostprocess: {score_threshold: 0.0}\n";
}

Batch make_batch(const std::string& type) {
  at::manual_seed(7);
  const int64_t n = 2, size = 128;
  Batch b;
  b.images = at::randn({n, 3, size, size});
  b.image_sizes = at::full({n, 2}, size, at::kLong);
  b.original_sizes = b.image_sizes.clone();
  b.scales = at::ones({n});
  b.geometries.resize(n);
  b.image_ids = {0, 1};
  if (type == "deeplabv3plus") {
    b.label_maps = at::randint(0, 5, {n, size, size}, at::kLong);
    b.label_maps.slice(1, 0, 8).fill_(255);
    return b;
  }
  b.boxes = at::tensor({10.f, 12.f, 60.f, 70.f, 70.f, 20.f, 120.f, 110.f}).view({1, 2, 4}).repeat({n, 1, 1});
  b.classes = at::tensor({1, 3}, at::kLong).view({1, 2}).repeat({n, 1});
  b.iscrowd = at::zeros({n, 2}, at::kBool);
  b.num_boxes = at::full({n}, 2, at::kLong);
  if (type == "mask_rcnn") {
    b.masks = at::zeros({n, 2, size, size}, at::kByte);
    b.masks.select(1, 0).slice(1, 12, 70).slice(2, 10, 60).fill_(1);
    b.masks.select(1, 1).slice(1, 20, 110).slice(2, 70, 120).fill_(1);
  }
  return b;
}

std::shared_ptr<ModelImpl> model_for(const std::string& type) {
  at::manual_seed(0);
  auto model = build_model(parse_config(config_text(type), "test_cuda_models"));
  model->train();
  return model;
}

double gradient_norm(ModelImpl& model) {
  return clip_gradients_by_global_norm(model.parameters(), 0.0);
}

class CudaModels : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaModels, TrainingLossAndGradientMatchTheCpu) {
  SKIP_WITHOUT_CUDA();
  full_fp32_on_cuda();
  const std::string type = GetParam();
  const Batch batch = make_batch(type);
  auto cpu = model_for(type);
  auto gpu = model_for(type);  // same seed: same initial weights
  gpu->to(at::Device(at::kCUDA, 0));
  ModelLosses cpu_losses = cpu->losses(batch);
  ModelLosses gpu_losses = gpu->losses(to_device(batch, at::Device(at::kCUDA, 0)));
  const double cpu_total = cpu_losses.total.item<double>(), gpu_total = gpu_losses.total.item<double>();
  EXPECT_NEAR(gpu_total, cpu_total, 1e-3 * std::abs(cpu_total)) << type;
  ASSERT_EQ(cpu_losses.parts.size(), gpu_losses.parts.size());
  for (size_t i = 0; i < cpu_losses.parts.size(); ++i) {
    const double c = cpu_losses.parts[i].second.item<double>(), g = gpu_losses.parts[i].second.item<double>();
    EXPECT_NEAR(g, c, 1e-3 * std::abs(c) + 1e-5) << type << " " << cpu_losses.parts[i].first;
  }
  cpu_losses.total.backward();
  gpu_losses.total.backward();
  const double cpu_norm = gradient_norm(*cpu), gpu_norm = gradient_norm(*gpu);
  EXPECT_NEAR(gpu_norm, cpu_norm, 1e-2 * cpu_norm) << type;
}

// On the CPU (no GPU here) bf16 alone: fp16 convolutions have no fast CPU kernels.
TEST_P(CudaModels, MixedPrecisionStepsAreFinite) {
  const std::string type = GetParam();
  const bool gpu = torch::cuda::is_available();
  const at::Device cuda = gpu ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  const Batch batch = to_device(make_batch(type), cuda);
  for (const std::string& precision : gpu ? std::vector<std::string>{"bf16", "fp16"} : std::vector<std::string>{"bf16"}) {
    auto model = model_for(type);
    model->to(cuda);
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    LossScaler scaler(cuda);
    for (int step = 0; step < 2; ++step) {
      sgd.zero_grad();
      ModelLosses l;
      {
        AutocastScope autocast(cuda, precision);
        l = model->losses(batch);
      }
      EXPECT_EQ(l.total.scalar_type(), at::kFloat) << type << " " << precision << ": losses stay fp32";
      EXPECT_TRUE(std::isfinite(l.total.item<double>())) << type << " " << precision;
      (precision == "fp16" ? scaler.scale(l.total) : l.total).backward();
      const at::Tensor found_inf = precision == "fp16" ? scaler.unscale_gradients(model->parameters())
                                                       : at::zeros({1}, at::TensorOptions(cuda));
      if (found_inf.item<float>() == 0) sgd.step();
      if (precision == "fp16") scaler.update(found_inf);
    }
    for (const auto& p : model->parameters()) ASSERT_TRUE(at::isfinite(p).all().item<bool>()) << type << " " << precision;
  }
}

INSTANTIATE_TEST_SUITE_P(AllModels, CudaModels,
                         ::testing::Values("retinanet", "efficientdet", "faster_rcnn", "mask_rcnn", "deeplabv3plus"));

TEST(CudaCheckpoint, WrittenOnCudaRestoresOnCpu) {
  SKIP_WITHOUT_CUDA();
  const at::Device cuda(at::kCUDA, 0);
  auto gpu = model_for("retinanet");
  gpu->to(cuda);
  torch::optim::SGD gpu_sgd(gpu->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  gpu->losses(to_device(make_batch("retinanet"), cuda)).total.backward();
  gpu_sgd.step();  // momentum buffers now exist, on the GPU
  const detseg::testing::TempDir path_temp("cuda_ckpt");
  const std::string path = (path_temp / "cuda_ckpt.dsckpt").string();
  write_checkpoint(path, capture_training_state(1, *gpu, &gpu_sgd, nullptr));

  auto cpu = model_for("retinanet");
  torch::optim::SGD cpu_sgd(cpu->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  // The CPU optimizer needs state slots to load into: one step on a zero gradient makes them.
  for (auto& p : cpu->parameters()) p.mutable_grad() = at::zeros_like(p);
  cpu_sgd.step();
  EXPECT_EQ(restore_training_state(path, *cpu, &cpu_sgd, nullptr), 1);
  const auto gpu_params = gpu->named_parameters(), cpu_params = cpu->named_parameters();
  for (const auto& item : gpu_params) {
    const at::Tensor& c = cpu_params[item.key()];
    EXPECT_TRUE(c.device().is_cpu());
    EXPECT_TRUE(at::equal(item.value().cpu(), c)) << item.key();
  }
  // The restored momentum continues the same step on the CPU as on the GPU.
  for (auto& p : cpu->parameters()) p.mutable_grad() = at::zeros_like(p);
  for (auto& p : gpu->parameters()) p.mutable_grad() = at::zeros_like(p);
  cpu_sgd.step();
  gpu_sgd.step();
  for (const auto& item : gpu_params)
    EXPECT_TRUE(at::allclose(item.value().cpu(), cpu_params[item.key()], 1e-6, 1e-7)) << item.key();
  std::filesystem::remove(path);
}

}  // namespace
