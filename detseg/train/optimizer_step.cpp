// Implements: TrainOptimizer::step, an update the device itself skips when a step's gradients are
// not finite (a NaN loss, an fp16 overflow), so the training loop never waits for the GPU to learn
// whether to apply it; and sync_state, which puts the step counts kept on the device back into the
// torch::optim state that checkpoints save.
#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_fused_adam.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/_fused_sgd.h>

#include <algorithm>
#include <numeric>
#include <vector>
#include <torch/optim.h>

#include "detseg/core/error.h"
#include "detseg/train/optimizer.h"

namespace detseg {
namespace {

namespace optim = torch::optim;

// The fused kernels walk raw memory, so a parameter's gradient and state must share its strides
// (a channels-last weight may get a contiguous gradient, or contiguous state from a checkpoint).
at::Tensor like_param(const at::Tensor& t, const at::Tensor& p) {
  return t.strides() == p.strides() ? t : at::empty_like(p).copy_(t);
}

// ATen's fused CPU kernels clone a gradient that is not contiguous (2.11's Adam then walks the
// original's raw memory anyway): one copy of every channels-last weight's gradient a step. Seen
// through the permutation that makes it contiguous (a channels-last [O, I, kh, kw] weight as
// [O, kh, kw, I]), the same memory goes through without the copy; a parameter, its gradient and its
// state share strides (like_param), so the same permutation pairs the same elements.
at::Tensor as_contiguous_view(const at::Tensor& t) {
  if (t.is_contiguous() || !t.is_non_overlapping_and_dense()) return t;
  std::vector<int64_t> order(static_cast<size_t>(t.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return t.stride(a) > t.stride(b); });
  at::Tensor view = t.permute(order);
  return view.is_contiguous() ? view : t;
}

std::vector<at::Tensor> as_contiguous_views(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> views;
  views.reserve(tensors.size());
  for (const at::Tensor& t : tensors) views.push_back(as_contiguous_view(t));
  return views;
}

// The parameter's state in the optimizer, created by `init` on its first update as torch::optim
// would create it.
template <class State, class Init>
State& param_state(optim::Optimizer& optimizer, const at::Tensor& p, Init init) {
  auto& states = optimizer.state();
  auto it = states.find(p.unsafeGetTensorImpl());
  if (it == states.end()) {
    auto state = std::make_unique<State>();
    init(*state);
    it = states.emplace(p.unsafeGetTensorImpl(), std::move(state)).first;
  }
  return static_cast<State&>(*it->second);
}

template <class State>
State* find_state(optim::Optimizer& optimizer, const at::Tensor& p) {
  auto it = optimizer.state().find(p.unsafeGetTensorImpl());
  return it == optimizer.state().end() ? nullptr : static_cast<State*>(it->second.get());
}

// Adam and AdamW keep the same state under two class names.
template <class State, class Options>
void adam_group(optim::Optimizer& optimizer, optim::OptimizerParamGroup& group, const std::vector<at::Tensor>& params,
                const std::vector<at::Tensor>& grads, const std::vector<at::Tensor>& steps, const at::Tensor& skip,
                bool decoupled) {
  const auto& o = static_cast<const Options&>(group.options());
  DETSEG_CHECK(!o.amsgrad(), "amsgrad is not supported");
  std::vector<at::Tensor> exp_avgs, exp_avg_sqs;
  for (const auto& p : params) {
    State& s = param_state<State>(optimizer, p, [&](State& fresh) {
      fresh.exp_avg(at::zeros_like(p));
      fresh.exp_avg_sq(at::zeros_like(p));
    });
    s.exp_avg(like_param(s.exp_avg(), p));
    s.exp_avg_sq(like_param(s.exp_avg_sq(), p));
    exp_avgs.push_back(s.exp_avg());
    exp_avg_sqs.push_back(s.exp_avg_sq());
  }
  const auto [beta1, beta2] = o.betas();
  const auto p = as_contiguous_views(params), g = as_contiguous_views(grads), m = as_contiguous_views(exp_avgs),
             v = as_contiguous_views(exp_avg_sqs);
  if (decoupled)
    at::_fused_adamw_(p, g, m, v, {}, steps, o.lr(), beta1, beta2, o.weight_decay(), o.eps(), false, false,
                      std::nullopt, skip);
  else
    at::_fused_adam_(p, g, m, v, {}, steps, o.lr(), beta1, beta2, o.weight_decay(), o.eps(), false, false,
                     std::nullopt, skip);
}

// torch::optim::RMSprop's update (not centered), each new value kept only where `skip` is 0.
void rmsprop_group(optim::Optimizer& optimizer, optim::OptimizerParamGroup& group,
                   const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads, const at::Tensor& skip) {
  const auto& o = static_cast<const optim::RMSpropOptions&>(group.options());
  DETSEG_CHECK(!o.centered(), "centered RMSprop is not supported");
  const at::Tensor skipped = skip.to(at::kBool);
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    optim::RMSpropParamState& s = param_state<optim::RMSpropParamState>(optimizer, p, [&](auto& fresh) {
      fresh.square_avg(at::zeros_like(p));
      if (o.momentum() > 0) fresh.momentum_buffer(at::zeros_like(p));
    });
    const at::Tensor grad = o.weight_decay() != 0 ? grads[i].add(p, o.weight_decay()) : grads[i];
    const at::Tensor square_avg = s.square_avg().mul(o.alpha()).addcmul_(grad, grad, 1 - o.alpha());
    const at::Tensor avg = square_avg.sqrt().add_(o.eps());
    at::Tensor updated;
    if (o.momentum() > 0) {
      const at::Tensor buffer = s.momentum_buffer().mul(o.momentum()).addcdiv_(grad, avg);
      updated = p.add(buffer, -o.lr());
      s.momentum_buffer().copy_(at::where(skipped, s.momentum_buffer(), buffer));
    } else {
      updated = p.addcdiv(grad, avg, -o.lr());
    }
    s.square_avg().copy_(at::where(skipped, s.square_avg(), square_avg));
    p.copy_(at::where(skipped, p, updated));
  }
}

// Adam, AdamW and RMSprop keep a step count in their state, each under its own class: calls
// `f(state)` with the parameter's state when it has one.
template <class F>
void with_counted_state(const std::string& type, optim::Optimizer& optimizer, const at::Tensor& p, F f) {
  if (type == "adam") {
    if (auto* s = find_state<optim::AdamParamState>(optimizer, p)) f(*s);
  } else if (type == "adamw") {
    if (auto* s = find_state<optim::AdamWParamState>(optimizer, p)) f(*s);
  } else if (type == "rmsprop") {
    if (auto* s = find_state<optim::RMSpropParamState>(optimizer, p)) f(*s);
  }
}

}  // namespace

void TrainOptimizer::step(const torch::Tensor& skip) {
  DETSEG_CHECK(optimizer, "step on an optimizer that was not built");
  torch::NoGradGuard no_grad;
  auto& groups = optimizer->param_groups();
  const bool counts_steps = type == "adam" || type == "adamw" || type == "rmsprop";
  if (counts_steps && device_steps.empty()) {
    // From the state a checkpoint restored, else 0; float, as the fused kernels want them.
    for (auto& group : groups)
      for (const auto& p : group.params()) {
        int64_t step = 0;
        with_counted_state(type, *optimizer, p, [&](auto& state) { step = state.step(); });
        device_steps.push_back(at::full({}, static_cast<double>(step), p.options().dtype(at::kFloat)));
      }
  }
  size_t flat = 0;
  for (auto& group : groups) {
    std::vector<at::Tensor> params, grads, steps;
    for (const auto& p : group.params()) {
      const size_t index = flat++;
      if (!p.grad().defined()) continue;  // as torch::optim: no gradient, no update, no step count
      params.push_back(p);
      grads.push_back(like_param(p.grad(), p));
      if (counts_steps) steps.push_back(device_steps.at(index));
    }
    if (params.empty()) continue;
    if (counts_steps) at::_foreach_add_(steps, 1 - skip);
    if (type == "momentum" || type == "sgd") {
      const auto& o = static_cast<const optim::SGDOptions&>(group.options());
      DETSEG_CHECK(o.dampening() == 0, "SGD dampening is not supported");
      std::vector<at::Tensor> buffers;
      if (o.momentum() != 0)
        for (const auto& p : params) {
          // A zero buffer then `buf = momentum * buf + grad` equals torch's first-step clone (no dampening).
          auto& s = param_state<optim::SGDParamState>(*optimizer, p,
                                                      [&](auto& fresh) { fresh.momentum_buffer(at::zeros_like(p)); });
          s.momentum_buffer(like_param(s.momentum_buffer(), p));
          buffers.push_back(s.momentum_buffer());
        }
      at::_fused_sgd_(as_contiguous_views(params), as_contiguous_views(grads), as_contiguous_views(buffers),
                      o.weight_decay(), o.momentum(), o.lr(), o.dampening(), o.nesterov(), false,
                      false, std::nullopt, skip);
    } else if (type == "adam") {
      adam_group<optim::AdamParamState, optim::AdamOptions>(*optimizer, group, params, grads, steps, skip, false);
    } else if (type == "adamw") {
      adam_group<optim::AdamWParamState, optim::AdamWOptions>(*optimizer, group, params, grads, steps, skip, true);
    } else if (type == "rmsprop") {
      rmsprop_group(*optimizer, group, params, grads, skip);
    } else {
      throw Error(str("TrainOptimizer::step: unknown optimizer type '", type, "'"));
    }
    // ATen's fused kernels write the parameters without bumping their version counters (an
    // in-place op would). Whatever is keyed on (data, version) would then miss the update: the
    // packed inference weights (ops/packed_conv.h) made at one periodic evaluation were used again
    // at the next, which scored the older weights. A host-side counter: no device work.
    for (const auto& p : params) p.unsafeGetTensorImpl()->bump_version();
  }
}

void TrainOptimizer::sync_state() {
  if (device_steps.empty()) return;
  const at::Tensor host = at::stack(device_steps).cpu();
  const float* counts = host.data_ptr<float>();
  size_t flat = 0;
  for (auto& group : optimizer->param_groups())
    for (const auto& p : group.params()) {
      const auto step = static_cast<int64_t>(counts[flat++]);
      with_counted_state(type, *optimizer, p, [&](auto& state) { state.step(step); });
    }
}

}  // namespace detseg
