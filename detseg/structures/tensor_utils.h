// Implements: two small device/precision helpers shared by the box math, the losses and the models:
// the fp32 upcast for mixed precision and the rule for when value checks may read a tensor on the
// host.
#pragma once

#include <ATen/core/Tensor.h>

namespace detseg {

// Under autocast (bf16/fp16) the network's outputs arrive in half precision; losses and box
// decoding must compute in fp32. Returns x as float32 when it is a bf16 or fp16 tensor, otherwise x
// itself (unchanged: fp32/fp64/integer tensors and undefined ones pass through, so CPU fp32 paths
// stay bit-identical). The cast is differentiable.
inline at::Tensor upcast_low_precision(const at::Tensor& x) {
  if (x.defined() && (x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16))
    return x.to(at::kFloat);
  return x;
}

// Whether a data-dependent sanity check (NaN scan, label range) may read `t`'s values on the host.
// True for CPU tensors, where it is free; false on accelerators, where every read is a device
// synchronisation in the training step. The kernels there still fail loudly on out-of-range
// indices (device-side assert); NaN inputs are not caught there.
inline bool host_value_checks(const at::Tensor& t) { return !t.defined() || t.device().is_cpu(); }

}  // namespace detseg
