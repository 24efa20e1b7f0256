// Implements: synchronised batch norm over the replicas of a data-parallel job.
#include "detseg/models/layers/sync_batch_norm.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

#include "detseg/structures/tensor_utils.h"

namespace detseg {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// y = sum over replicas of x; dL/dx = sum over replicas of dL/dy (each replica's loss depends on
// the global sum, and the gradients of all replicas' losses are summed, then averaged, later).
class ReplicaSumFunction : public torch::autograd::Function<ReplicaSumFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t sum_address) {
    ctx->saved_data["sum"] = sum_address;
    at::Tensor y = x.clone(at::MemoryFormat::Contiguous);
    (*reinterpret_cast<const ReplicaSum*>(sum_address))(y);
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto* sum = reinterpret_cast<const ReplicaSum*>(ctx->saved_data["sum"].toInt());
    at::Tensor g = grads[0].clone(at::MemoryFormat::Contiguous);
    (*sum)(g);
    return {g, at::Tensor()};
  }
};

}  // namespace

at::Tensor sync_batch_norm(const at::Tensor& x_in, const at::Tensor& weight, const at::Tensor& bias,
                           at::Tensor& running_mean, at::Tensor& running_var, double momentum, double eps,
                           const ReplicaSum& sum) {
  TORCH_CHECK(x_in.dim() == 4, "sync_batch_norm: expected [N, C, H, W], got ", x_in.sizes());
  // Statistics in fp32 under autocast: a bf16 count or sum of squares loses the batch statistics
  // (bf16 holds integers exactly only up to 256). The output returns to x's precision.
  const at::Tensor x = upcast_low_precision(x_in);
  const int64_t c = x.size(1);
  const at::Tensor count = at::full({1}, static_cast<double>(x.numel() / c), x.options());
  at::Tensor local = at::cat({x.sum({0, 2, 3}), (x * x).sum({0, 2, 3}), count});
  at::Tensor global = ReplicaSumFunction::apply(local, reinterpret_cast<int64_t>(&sum));
  // The global count stays on the device: over NCCL the all-reduce does not make the host wait,
  // and a read here would, once per layer. The CPU checks it (reading costs nothing there).
  const at::Tensor n = global.narrow(0, 2 * c, 1).detach();
  if (host_value_checks(n)) {
    const double values = n.item<double>();
    TORCH_CHECK(values > 1, "sync_batch_norm: the global batch has ", values, " values per channel; need more than 1");
  }
  at::Tensor mean = global.narrow(0, 0, c) / n;
  at::Tensor var = global.narrow(0, c, c) / n - mean * mean;  // biased, as batch norm normalises
  {
    at::NoGradGuard no_grad;
    running_mean.mul_(1 - momentum).add_(mean.detach(), momentum);
    running_var.mul_(1 - momentum).add_(var.detach() * (n / (n - 1)), momentum);
  }
  at::Tensor scale = at::rsqrt(var + eps) * weight;
  return ((x - mean.view({1, c, 1, 1})) * scale.view({1, c, 1, 1}) + bias.view({1, c, 1, 1}))
      .to(x_in.scalar_type());
}

}  // namespace detseg
