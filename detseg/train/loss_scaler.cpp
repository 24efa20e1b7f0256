#include "detseg/train/loss_scaler.h"

#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_amp_update_scale.h>

#include <algorithm>

#include "detseg/core/error.h"

namespace detseg {

LossScaler::LossScaler(const at::Device& device, LossScalerOptions options)
    : options_(options),
      scale_(at::full({1}, options.init_scale, at::TensorOptions(at::kFloat).device(device))),
      growth_tracker_(at::zeros({1}, at::TensorOptions(at::kInt).device(device))) {}

at::Tensor LossScaler::unscale_gradients(const std::vector<at::Tensor>& params) const {
  at::Tensor found_inf = at::zeros({1}, scale_.options());
  const at::Tensor inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
  std::vector<at::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  // The fused kernel wants one dtype per call; fp32 master weights make that the common case.
  std::vector<at::ScalarType> dtypes;
  for (const auto& g : grads)
    if (std::find(dtypes.begin(), dtypes.end(), g.scalar_type()) == dtypes.end()) dtypes.push_back(g.scalar_type());
  for (at::ScalarType dtype : dtypes) {
    std::vector<at::Tensor> same;
    for (const auto& g : grads)
      if (g.scalar_type() == dtype) same.push_back(g);
    at::_amp_foreach_non_finite_check_and_unscale_(same, found_inf, inv_scale);
  }
  return found_inf;
}

void LossScaler::update(const at::Tensor& found_inf) {
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf, options_.growth_factor, options_.backoff_factor,
                         options_.growth_interval);
}

double LossScaler::current_scale() const { return scale_.item<double>(); }

NamedTensors LossScaler::state() const {
  return {{"loss_scale", scale_.detach().cpu()}, {"loss_scale_growth_tracker", growth_tracker_.detach().cpu()}};
}

void LossScaler::load(const NamedTensors& state) {
  for (const auto& [name, t] : state) {
    at::Tensor* target = name == "loss_scale" ? &scale_ : name == "loss_scale_growth_tracker" ? &growth_tracker_ : nullptr;
    if (target == nullptr) continue;
    DETSEG_CHECK(t.numel() == 1, "loss scaler state '", name, "' has ", t.numel(), " elements, expected 1");
    target->copy_(t.reshape({1}));
  }
}

}  // namespace detseg
