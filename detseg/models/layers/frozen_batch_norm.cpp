// Implements: 2-D batch norm that is either trainable or frozen (torchvision FrozenBatchNorm2d).
#include "detseg/models/layers/frozen_batch_norm.h"

#include <ATen/ATen.h>

namespace detseg {

Norm2dImpl::Norm2dImpl(const Norm2dOptions& options_) : options(options_) {
  const int64_t c = options.num_features();
  TORCH_CHECK(c > 0, "Norm2d: num_features must be > 0, got ", c);
  if (options.frozen()) {
    weight = register_buffer("weight", at::ones({c}));
    bias = register_buffer("bias", at::zeros({c}));
  } else {
    weight = register_parameter("weight", at::ones({c}));
    bias = register_parameter("bias", at::zeros({c}));
  }
  running_mean = register_buffer("running_mean", at::zeros({c}));
  running_var = register_buffer("running_var", at::ones({c}));
  if (!options.frozen()) {
    num_batches_tracked = register_buffer("num_batches_tracked", at::zeros({}, at::kLong));
  }
}

void Norm2dImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  weight.fill_(1);
  bias.zero_();
  running_mean.zero_();
  running_var.fill_(1);
}

at::Tensor Norm2dImpl::forward(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 4 && x.size(1) == options.num_features(), "Norm2d(",
              options.num_features(), "): expected [N, ", options.num_features(),
              ", H, W], got ", x.sizes());
  const bool use_batch_stats = is_training() && !options.frozen();
  if (use_batch_stats) {
    at::NoGradGuard no_grad;
    num_batches_tracked.add_(1);
  }
  if (use_batch_stats && replica_sum)
    return sync_batch_norm(x, weight, bias, running_mean, running_var, options.momentum(), options.eps(), replica_sum);
  // Frozen: one fused affine kernel (batch_norm in inference mode) instead of torchvision's
  // x * scale + bias; same values, and it has a backward for the input.
  return at::batch_norm(x, weight, bias, running_mean, running_var, use_batch_stats,
                        options.momentum(), options.eps(), /*cudnn_enabled=*/true);
}

void Norm2dImpl::pretty_print(std::ostream& stream) const {
  stream << (options.frozen() ? "FrozenBatchNorm2d(" : "BatchNorm2d(") << options.num_features()
         << ", eps=" << options.eps() << ")";
}

}  // namespace detseg
