// Implements: 2-D batch norm that is either trainable (torch BatchNorm2d) or frozen
// (torchvision FrozenBatchNorm2d: fixed statistics and affine, all four stored as buffers).
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "detseg/models/layers/sync_batch_norm.h"
#include "detseg/ops/packed_conv.h"

namespace detseg {

struct Norm2dOptions {
  explicit Norm2dOptions(int64_t num_features) : num_features_(num_features) {}
  TORCH_ARG(int64_t, num_features);
  TORCH_ARG(double, eps) = 1e-5;       // torchvision FrozenBatchNorm2d and BatchNorm2d default
  TORCH_ARG(double, momentum) = 0.1;   // torch convention (TF's 0.99 decay is 0.01 here)
  TORCH_ARG(bool, frozen) = false;
};

// Parameter names equal torch's: weight, bias, running_mean, running_var (+ num_batches_tracked
// when trainable). Frozen: weight and bias are buffers, so they are not counted as parameters and
// never trained, exactly as torchvision's FrozenBatchNorm2d; train() does not change it.
class Norm2dImpl : public torch::nn::Module {
 public:
  explicit Norm2dImpl(const Norm2dOptions& options);
  void reset_parameters();
  at::Tensor forward(const at::Tensor& x);  // x: [N, C, H, W]
  void pretty_print(std::ostream& stream) const override;

  Norm2dOptions options;
  at::Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  // Set (by dist::DataParallel, train.distributed.sync_batch_norm) on trainable layers of a
  // data-parallel job: training then normalises over the global batch (sync_batch_norm).
  ReplicaSum replica_sum;
  PackedConvWeights packed_conv;  // the preceding conv folded with this norm, for the fast layout (conv2d_norm)
};
TORCH_MODULE(Norm2d);

// torchvision's FrozenBatchNorm2d(num_features, eps=1e-5).
inline Norm2d FrozenBatchNorm2d(int64_t num_features, double eps = 1e-5) {
  return Norm2d(Norm2dOptions(num_features).eps(eps).frozen(true));
}

}  // namespace detseg
