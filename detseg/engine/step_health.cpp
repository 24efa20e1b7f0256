#include "detseg/engine/step_health.h"

#include <cmath>

#include "detseg/core/error.h"

namespace detseg {

void StepHealth::record(int64_t step_number, const at::Tensor& total, const at::Tensor& grad_norm, const at::Tensor& l2,
                        const std::vector<std::pair<std::string, at::Tensor>>& parts, const at::Tensor& skipped) {
  const at::TensorOptions options = total.options().dtype(at::kDouble);
  std::vector<at::Tensor> values = {total.detach().to(at::kDouble).reshape({1}),
                                    grad_norm.detach().to(options).reshape({1}), l2.detach().to(at::kDouble).reshape({1})};
  std::vector<std::string> names;
  for (const auto& [name, part] : parts) {
    values.push_back(part.detach().to(at::kDouble).reshape({1}));
    names.push_back(name);
  }
  latest_ = at::cat(values);
  const at::Tensor skip = skipped.to(options).reshape({});
  if (!failed_step_.defined() || names != part_names_) {
    part_names_ = names;
    failure_ = at::zeros_like(latest_);
    failed_step_ = at::full({}, -1.0, options);
    skipped_ = at::zeros({}, options);
    overflow_run_ = at::zeros({}, options);
  }
  skipped_ += skip;
  overflow_run_ = (overflow_run_ + 1) * skip;
  // A failure: a skipped update (with fp16, too many in a row), or this rank's own loss not finite
  // while the update went ahead (its gradients stayed finite).
  const at::Tensor loss_bad = latest_[0].isfinite().logical_not().logical_and(skip == 0);
  const at::Tensor failed = (fp16_ ? overflow_run_ > static_cast<double>(max_overflow_run_) : skip > 0).logical_or(loss_bad);
  const at::Tensor first = failed.logical_and(failed_step_ < 0);
  failed_step_ = at::where(first, static_cast<double>(step_number), failed_step_);
  failure_ = at::where(first, latest_, failure_);
}

bool StepHealth::Values::loss_finite() const { return std::isfinite(total); }

std::string StepHealth::Values::parts_text() const {
  std::string text;
  for (const auto& [name, value] : parts) text += str(" ", name, "=", value);
  return text;
}

StepHealth::Reading StepHealth::read() {
  Reading r;
  if (!latest_.defined()) return r;
  const at::Tensor host = at::cat({failed_step_.reshape({1}), skipped_.reshape({1}), latest_, failure_}).cpu();
  const double* v = host.data_ptr<double>();
  const size_t n = static_cast<size_t>(latest_.numel());
  auto values_at = [&](const double* x) {
    Values out{x[0], x[1], x[2], {}};
    for (size_t i = 0; i < part_names_.size(); ++i) out.parts.push_back({part_names_[i], x[3 + i]});
    return out;
  };
  r.failed_step = static_cast<int64_t>(v[0]);
  r.skipped_steps = static_cast<int64_t>(v[1]);
  r.latest = values_at(v + 2);
  if (r.failed_step >= 0) r.failure = values_at(v + 2 + n);
  failed_step_.fill_(-1.0);
  skipped_.zero_();
  return r;
}

}  // namespace detseg
