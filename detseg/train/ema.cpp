// Implements: the weight EMA declared in ema.h.
#include "detseg/train/ema.h"

#include <torch/nn/module.h>

#include <algorithm>

#include "detseg/core/error.h"

namespace detseg {

NamedTensors ema_tracked_tensors(const torch::nn::Module& model) {
  NamedTensors out;
  for (const auto& item : model.named_parameters(true)) out.emplace_back(item.key(), item.value());
  // Batch-norm statistics are averaged too (the reference's ema vars include moving mean and
  // variance); integer buffers such as num_batches_tracked are not.
  for (const auto& item : model.named_buffers(true))
    if (item.value().is_floating_point()) out.emplace_back(item.key(), item.value());
  return out;
}

double ema_decay_at(const EmaOptions& options, int64_t num_updates) {
  if (!options.use_num_updates) return options.decay;
  const double n = static_cast<double>(num_updates);
  return std::min(options.decay, (1.0 + n) / (10.0 + n));
}

WeightEma::WeightEma(const torch::nn::Module& model, EmaOptions options) : options_(options) {
  DETSEG_CONFIG_CHECK(options.decay > 0 && options.decay < 1,
                      "moving_average_decay must be in (0, 1), got ", options.decay);
  torch::NoGradGuard no_grad;
  for (const auto& [name, t] : ema_tracked_tensors(model))
    shadow_.emplace_back(name, t.detach().clone());
}

namespace {
// The model's tracked tensors, checked against the shadow list by name and shape.
NamedTensors matched_tensors(const torch::nn::Module& model, const NamedTensors& shadow) {
  NamedTensors current = ema_tracked_tensors(model);
  DETSEG_CHECK(current.size() == shadow.size(), "EMA tracks ", shadow.size(),
               " tensors but the model has ", current.size());
  for (size_t i = 0; i < current.size(); ++i) {
    DETSEG_CHECK(current[i].first == shadow[i].first, "EMA tensor ", i, " is '", shadow[i].first,
                 "' but the model's is '", current[i].first, "'");
    DETSEG_CHECK(current[i].second.sizes() == shadow[i].second.sizes(), "EMA tensor '",
                 shadow[i].first, "' has shape ", shadow[i].second.sizes(), ", model has ",
                 current[i].second.sizes());
  }
  return current;
}
}  // namespace

double WeightEma::update(const torch::nn::Module& model, int64_t num_updates) {
  DETSEG_CHECK(!swapped_, "WeightEma::update while the averages are swapped into the model");
  const double decay = ema_decay_at(options_, num_updates);
  torch::NoGradGuard no_grad;
  NamedTensors current = matched_tensors(model, shadow_);
  for (size_t i = 0; i < current.size(); ++i) {
    auto& s = shadow_[i].second;
    s.sub_((s - current[i].second.to(s.options())) * (1.0 - decay));
  }
  return decay;
}

void WeightEma::swap(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  NamedTensors current = matched_tensors(model, shadow_);
  for (size_t i = 0; i < current.size(); ++i) {
    torch::Tensor weights = current[i].second.detach().clone();
    current[i].second.copy_(shadow_[i].second);
    shadow_[i].second.copy_(weights);
  }
  swapped_ = !swapped_;
}

void WeightEma::load(const NamedTensors& averages) {
  DETSEG_CHECK(averages.size() == shadow_.size(), "EMA state has ", averages.size(),
               " tensors, expected ", shadow_.size());
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < averages.size(); ++i) {
    DETSEG_CHECK(averages[i].first == shadow_[i].first &&
                     averages[i].second.sizes() == shadow_[i].second.sizes(),
                 "EMA state tensor '", averages[i].first, "' ", averages[i].second.sizes(),
                 " does not match '", shadow_[i].first, "' ", shadow_[i].second.sizes());
    shadow_[i].second.copy_(averages[i].second);
  }
  swapped_ = false;
}

EmaScope::EmaScope(WeightEma* ema, torch::nn::Module& model) : ema_(ema), model_(model) {
  if (ema_) ema_->swap(model_);
}

EmaScope::~EmaScope() {
  if (ema_) ema_->swap(model_);
}

}  // namespace detseg
