// Implements: parameter selection, optimizer construction, the L2 term and global-norm clipping.
#include "detseg/train/optimizer.h"

#include <torch/nn/module.h>
#include <torch/optim.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_norm.h>
#include <ATen/ops/linalg_vector_norm.h>

#include <cmath>
#include <regex>

#include "detseg/core/error.h"
#include "detseg/train/name_pattern.h"

namespace detseg {
std::vector<GradientMultiplier> deeplab_gradient_multipliers(
    const std::vector<std::string>& last_layers, double last_layer_multiplier) {
  std::vector<GradientMultiplier> rules{{R"((^|\.)bias$)", 2.0}};
  for (const auto& layer : last_layers)
    rules.push_back({escape_regex(layer), last_layer_multiplier});
  return rules;
}

std::vector<torch::Tensor> ParameterSelection::tensors() const {
  std::vector<torch::Tensor> out;
  for (const auto& p : trainable) out.push_back(p.tensor);
  return out;
}

std::vector<torch::Tensor> ParameterSelection::l2_tensors() const {
  std::vector<torch::Tensor> out;
  for (const auto& p : trainable)
    if (p.l2) out.push_back(p.tensor);
  return out;
}

ParameterSelection select_parameters(torch::nn::Module& model, const OptimizerOptions& options) {
  const std::regex l2_re = compile_name_pattern(options.l2_pattern, "l2");
  const bool has_freeze = !options.freeze_pattern.empty();
  const std::regex freeze_re =
      compile_name_pattern(has_freeze ? options.freeze_pattern : "$^", "freeze");
  std::vector<std::pair<std::regex, double>> multipliers;
  for (const auto& m : options.multipliers) {
    DETSEG_CONFIG_CHECK(std::isfinite(m.factor) && m.factor >= 0, "gradient multiplier for '",
                        m.pattern, "' must be a finite number >= 0, got ", m.factor);
    multipliers.emplace_back(compile_name_pattern(m.pattern, "gradient multiplier"), m.factor);
  }
  ParameterSelection sel;
  for (auto& item : model.named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    torch::Tensor p = item.value();
    if ((has_freeze && std::regex_search(name, freeze_re)) || !p.requires_grad()) {
      p.requires_grad_(false);
      sel.frozen.push_back(name);
      continue;
    }
    NamedParameter np{name, p, 1.0, false};
    for (const auto& m : multipliers)
      if (std::regex_search(name, m.first)) np.lr_scale *= m.second;
    np.l2 = p.dim() >= options.l2_min_dim && std::regex_search(name, l2_re);
    sel.trainable.push_back(std::move(np));
  }
  return sel;
}

TrainOptimizer::TrainOptimizer() = default;
TrainOptimizer::TrainOptimizer(TrainOptimizer&&) noexcept = default;
TrainOptimizer& TrainOptimizer::operator=(TrainOptimizer&&) noexcept = default;
TrainOptimizer::~TrainOptimizer() = default;

void TrainOptimizer::set_learning_rate(double lr) {
  DETSEG_CHECK(optimizer, "set_learning_rate on an optimizer that was not built");
  auto& groups = optimizer->param_groups();
  DETSEG_CHECK(groups.size() == group_lr_scales.size(), "optimizer has ", groups.size(),
               " parameter groups but ", group_lr_scales.size(), " rate scales");
  for (size_t i = 0; i < groups.size(); ++i) groups[i].options().set_lr(lr * group_lr_scales[i]);
}

TrainOptimizer build_optimizer(const ParameterSelection& params, const OptimizerOptions& o,
                               double initial_lr) {
  namespace optim = torch::optim;
  DETSEG_CHECK(!params.trainable.empty(), "build_optimizer: no trainable parameters (",
               params.frozen.size(), " frozen)");
  // One group per distinct scale, in order of first appearance so the layout is deterministic
  // (checkpointed optimizer state is matched by group and position).
  TrainOptimizer out;
  out.type = o.type;
  std::vector<std::vector<torch::Tensor>> grouped;
  for (const auto& p : params.trainable) {
    size_t g = 0;
    while (g < out.group_lr_scales.size() && out.group_lr_scales[g] != p.lr_scale) ++g;
    if (g == out.group_lr_scales.size()) {
      out.group_lr_scales.push_back(p.lr_scale);
      grouped.emplace_back();
    }
    grouped[g].push_back(p.tensor);
  }
  auto make_groups = [&](auto defaults) {
    std::vector<optim::OptimizerParamGroup> groups;
    for (size_t g = 0; g < grouped.size(); ++g) {
      auto opts = std::make_unique<decltype(defaults)>(defaults);
      opts->lr(initial_lr * out.group_lr_scales[g]);
      groups.emplace_back(grouped[g], std::move(opts));
    }
    return groups;
  };
  if (o.type == "momentum" || o.type == "sgd") {
    auto d = optim::SGDOptions(initial_lr).momentum(o.type == "sgd" ? 0.0 : o.momentum);
    d.nesterov(o.nesterov && o.type == "momentum");
    out.optimizer = std::make_unique<optim::SGD>(make_groups(d), d);
  } else if (o.type == "adam" || o.type == "adamw") {
    if (o.type == "adam") {
      auto d = optim::AdamOptions(initial_lr).betas({o.beta1, o.beta2}).eps(o.epsilon);
      out.optimizer = std::make_unique<optim::Adam>(make_groups(d), d);
    } else {
      auto d = optim::AdamWOptions(initial_lr)
                   .betas({o.beta1, o.beta2})
                   .eps(o.epsilon)
                   .weight_decay(o.adamw_weight_decay);
      out.optimizer = std::make_unique<optim::AdamW>(make_groups(d), d);
    }
  } else if (o.type == "rmsprop") {
    auto d = optim::RMSpropOptions(initial_lr)
                 .alpha(o.rmsprop_decay)
                 .eps(o.epsilon)
                 .momentum(o.momentum);
    out.optimizer = std::make_unique<optim::RMSprop>(make_groups(d), d);
  } else {
    throw ConfigError(
        str("unknown optimizer '", o.type, "' (valid: momentum, sgd, adam, adamw, rmsprop)"));
  }
  return out;
}

torch::Tensor l2_regularization_loss(const ParameterSelection& params, double weight_decay) {
  const auto tensors = params.l2_tensors();
  if (tensors.empty() || weight_decay == 0) {
    auto opts = params.trainable.empty() ? torch::TensorOptions(torch::kFloat)
                                         : params.trainable.front().tensor.options();
    return torch::zeros({}, opts.requires_grad(false));
  }
  torch::Tensor sum = tensors.front().pow(2).sum();
  for (size_t i = 1; i < tensors.size(); ++i) sum = sum + tensors[i].pow(2).sum();
  return sum * (0.5 * weight_decay);
}

torch::Tensor clip_gradients_by_global_norm_async(const std::vector<torch::Tensor>& params, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty())  // on the parameters' device, as a computed norm would be
    return torch::zeros({}, params.empty() ? torch::TensorOptions(torch::kDouble)
                                           : params.front().options().dtype(torch::kDouble));
  // One pass over each gradient, accumulated in its own precision (torch.nn.utils.clip_grad_norm_
  // does the same). A double copy of every gradient cost ~3 % of the R18 demo-size step.
  const torch::Tensor norm = at::linalg_vector_norm(at::stack(at::_foreach_norm(grads, 2)), 2);
  if (max_norm > 0) {
    // factor = max_norm / norm when the norm is finite and above the cap, else 1.
    const torch::Tensor clip = norm.isfinite().logical_and(norm > max_norm);
    const torch::Tensor factor = torch::where(clip, max_norm / norm, torch::ones_like(norm));
    at::_foreach_mul_(grads, factor);
  }
  return norm.to(torch::kDouble);
}

double clip_gradients_by_global_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  return clip_gradients_by_global_norm_async(params, max_norm).item<double>();
}

}  // namespace detseg
