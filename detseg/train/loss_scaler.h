// Implements: the dynamic loss scaler of fp16 mixed precision (torch.amp.GradScaler's rules): the
// loss is multiplied by a scale before backward so small fp16 gradients do not flush to zero; the
// gradients are divided back before clipping and the update; a step whose gradients overflowed is
// skipped and halves the scale, and 2000 clean steps in a row double it.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "detseg/io/named_tensors.h"

namespace detseg {

struct LossScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class LossScaler {
 public:
  LossScaler(const at::Device& device, LossScalerOptions options = {});

  at::Tensor scale(const at::Tensor& loss) const { return loss * scale_; }
  // Divides every defined gradient of `params` by the scale in place; returns a one-element float
  // tensor on the device, 1 when any gradient is inf or NaN (no host sync).
  at::Tensor unscale_gradients(const std::vector<at::Tensor>& params) const;
  // After the step (taken or skipped): backs off on overflow, grows after growth_interval clean steps.
  void update(const at::Tensor& found_inf);
  double current_scale() const;

  // {"loss_scale", "loss_scale_growth_tracker"}: saved with the checkpoint so a resume continues
  // with the same scale (bit-exact).
  NamedTensors state() const;
  void load(const NamedTensors& state);

 private:
  LossScalerOptions options_;
  at::Tensor scale_;           // float [1] on the device
  at::Tensor growth_tracker_;  // int32 [1]: clean steps since the last change
};

}  // namespace detseg
