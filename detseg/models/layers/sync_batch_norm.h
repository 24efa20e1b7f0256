// Implements: synchronised batch norm (torch's SyncBatchNorm): in training, each replica of a
// data-parallel job normalises with the mean and variance of the global batch (all replicas),
// gathered by one all-reduce of [sum x, sum x^2, count] per layer; backward all-reduces the
// gradient of those sums, so every replica gets the gradient of the global batch's statistics.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>

namespace detseg {

// Sums `t` (contiguous) in place over the replicas of a data-parallel job: an all-reduce.
using ReplicaSum = std::function<void(at::Tensor& t)>;

// Training-mode batch norm of x [N, C, H, W] over every replica's batch: biased variance for the
// normalisation, running_var updated with the unbiased one (n / (n - 1)), as at::batch_norm.
// `sum` must outlive the autograd graph (backward calls it). With a `sum` that does nothing (one
// replica) it equals at::batch_norm(training=true).
at::Tensor sync_batch_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                           at::Tensor& running_mean, at::Tensor& running_var, double momentum, double eps,
                           const ReplicaSum& sum);

}  // namespace detseg
