// Implements: the learning-rate schedules declared in schedules.h.
#include "detseg/train/schedules.h"

#include <cmath>

#include "detseg/core/error.h"

namespace detseg {
namespace {

constexpr double kPi = 3.14159265358979323846;

struct KindName {
  LrScheduleKind kind;
  const char* name;
};
constexpr KindName kKindNames[] = {
    {LrScheduleKind::kConstant, "constant"},
    {LrScheduleKind::kStepwise, "stepwise"},
    {LrScheduleKind::kCosine, "cosine"},
    {LrScheduleKind::kCosineWarmup, "cosine_warmup"},
    {LrScheduleKind::kPolynomial, "polynomial"},
    {LrScheduleKind::kStep, "step"},
    {LrScheduleKind::kPoly, "poly"},
};

int64_t steps_from_epochs(int64_t explicit_steps, double epochs, double steps_per_epoch) {
  if (explicit_steps >= 0) return explicit_steps;
  return static_cast<int64_t>(epochs * steps_per_epoch);  // truncation, as the reference's int()
}

}  // namespace

LrScheduleKind parse_lr_schedule_kind(const std::string& name) {
  std::string valid;
  for (const auto& kn : kKindNames) {
    if (name == kn.name) return kn.kind;
    valid += str(valid.empty() ? "" : ", ", kn.name);
  }
  throw ConfigError(str("unknown learning-rate schedule '", name, "' (valid: ", valid, ")"));
}

SlowStartBurnin parse_slow_start_burnin(const std::string& name) {
  if (name == "none") return SlowStartBurnin::kNone;
  if (name == "linear") return SlowStartBurnin::kLinear;
  throw ConfigError(str("unknown slow-start burn-in '", name, "' (valid: none, linear)"));
}

const char* lr_schedule_name(LrScheduleKind kind) {
  for (const auto& kn : kKindNames)
    if (kn.kind == kind) return kn.name;
  return "?";
}

Schedule resolve_schedule(const ScheduleOptions& o) {
  Schedule s;
  s.kind = parse_lr_schedule_kind(o.type);
  s.burnin = parse_slow_start_burnin(o.slow_start_burnin);
  DETSEG_CONFIG_CHECK(o.learning_rate > 0 && std::isfinite(o.learning_rate),
                      "learning_rate must be > 0, got ", o.learning_rate);
  DETSEG_CONFIG_CHECK(o.global_batch > 0, "global batch size must be > 0, got ", o.global_batch);
  DETSEG_CONFIG_CHECK(o.lr_base_batch > 0, "lr_base_batch must be > 0, got ", o.lr_base_batch);
  DETSEG_CONFIG_CHECK(o.warmup_init >= 0, "warmup_init must be >= 0, got ", o.warmup_init);
  DETSEG_CONFIG_CHECK(o.power > 0, "lr power must be > 0, got ", o.power);
  DETSEG_CONFIG_CHECK(o.slow_start_steps >= 0, "slow_start_steps must be >= 0, got ",
                      o.slow_start_steps);
  s.lr = o.scale_by_batch ? o.learning_rate * static_cast<double>(o.global_batch) /
                                static_cast<double>(o.lr_base_batch)
                          : o.learning_rate;
  DETSEG_CONFIG_CHECK(o.drop_steps.empty() || o.drop_steps.size() == 2,
                      "drop_steps needs 2 steps (the x0.1 and x0.01 drops), got ",
                      o.drop_steps.size());
  const bool need_epochs = o.total_steps < 0 || o.warmup_steps < 0 ||
                           (s.kind == LrScheduleKind::kStepwise && o.drop_steps.empty());
  DETSEG_CONFIG_CHECK(!need_epochs || o.examples_per_epoch > 0,
                      "examples_per_epoch must be > 0 to derive steps from epochs, got ",
                      o.examples_per_epoch);
  const double steps_per_epoch =
      static_cast<double>(o.examples_per_epoch) / static_cast<double>(o.global_batch);
  s.total_steps = steps_from_epochs(o.total_steps, o.num_epochs, steps_per_epoch);
  s.warmup_steps = steps_from_epochs(o.warmup_steps, o.warmup_epochs, steps_per_epoch);
  const bool drops = !o.drop_steps.empty();
  s.first_drop_step =
      steps_from_epochs(drops ? o.drop_steps[0] : -1, o.first_drop_epoch, steps_per_epoch);
  s.second_drop_step =
      steps_from_epochs(drops ? o.drop_steps[1] : -1, o.second_drop_epoch, steps_per_epoch);
  DETSEG_CONFIG_CHECK(s.total_steps > 0, "total training steps must be > 0, got ", s.total_steps);
  DETSEG_CONFIG_CHECK(s.warmup_steps >= 0, "warm-up steps must be >= 0, got ", s.warmup_steps);
  if (s.kind == LrScheduleKind::kCosineWarmup)
    DETSEG_CONFIG_CHECK(s.warmup_steps < s.total_steps, "cosine_warmup needs warm-up steps (",
                        s.warmup_steps, ") < total steps (", s.total_steps, ")");
  if (s.kind == LrScheduleKind::kStepwise)
    DETSEG_CONFIG_CHECK(s.first_drop_step <= s.second_drop_step, "first LR drop step (",
                        s.first_drop_step, ") must not come after the second (", s.second_drop_step,
                        ")");
  if (s.kind == LrScheduleKind::kStep) {
    DETSEG_CONFIG_CHECK(o.decay_steps > 0, "lr decay_steps must be > 0, got ", o.decay_steps);
    DETSEG_CONFIG_CHECK(o.decay_factor > 0, "lr decay_factor must be > 0, got ", o.decay_factor);
  }
  s.warmup_init = o.warmup_init;
  s.power = o.power;
  s.decay_steps = o.decay_steps;
  s.decay_factor = o.decay_factor;
  s.slow_start_steps = o.slow_start_steps;
  s.slow_start_lr = o.slow_start_learning_rate;
  return s;
}

double lr_linear_warmup(double lr, double warmup_init, int64_t warmup_steps, int64_t step) {
  return warmup_init +
         static_cast<double>(step) / static_cast<double>(warmup_steps) * (lr - warmup_init);
}

double lr_stepwise(double lr, double warmup_init, int64_t warmup_steps, int64_t first_drop,
                   int64_t second_drop, int64_t step) {
  if (step >= second_drop) return lr * 0.01;
  if (step >= first_drop) return lr * 0.1;
  if (step >= warmup_steps) return lr;
  return lr_linear_warmup(lr, warmup_init, warmup_steps, step);
}

double lr_cosine(double lr, double warmup_init, int64_t warmup_steps, int64_t total, int64_t step) {
  if (step < warmup_steps) return lr_linear_warmup(lr, warmup_init, warmup_steps, step);
  return 0.5 * lr * (1.0 + std::cos(kPi * static_cast<double>(step) / static_cast<double>(total)));
}

double lr_cosine_after_warmup(double lr, double warmup_init, int64_t warmup_steps, int64_t total,
                              int64_t step) {
  // The TF2 variant: warm-up includes its last step (which lands exactly on lr), and the cosine
  // spans only the steps after it. With no warm-up it is a plain cosine.
  if (warmup_steps > 0 && step <= warmup_steps)
    return lr_linear_warmup(lr, warmup_init, warmup_steps, step);
  const double t =
      static_cast<double>(step - warmup_steps) / static_cast<double>(total - warmup_steps);
  return lr * 0.5 * (1.0 + std::cos(kPi * t));
}

double lr_polynomial(double lr, double warmup_init, int64_t warmup_steps, double power,
                     int64_t total, int64_t step) {
  if (step < warmup_steps) return lr_linear_warmup(lr, warmup_init, warmup_steps, step);
  // Past the last step the base would go negative (NaN in the reference): hold at 0 instead.
  const double base = std::max(0.0, 1.0 - static_cast<double>(step) / static_cast<double>(total));
  return lr * std::pow(base, power);
}

double lr_exponential_staircase(double lr, int64_t decay_steps, double decay_factor, int64_t step) {
  const double periods = std::floor(static_cast<double>(step) / static_cast<double>(decay_steps));
  return lr * std::pow(decay_factor, periods);
}

double lr_poly_decay(double lr, int64_t total, double power, int64_t step) {
  // tf.train.polynomial_decay with end rate 0 and no cycling: the step is capped at total.
  const double s = static_cast<double>(std::min(step, total));
  return lr * std::pow(1.0 - s / static_cast<double>(total), power);
}

double learning_rate_at(const Schedule& s, int64_t step) {
  DETSEG_CHECK(step >= 0, "learning_rate_at: step must be >= 0, got ", step);
  if (step < s.slow_start_steps) {
    if (s.burnin == SlowStartBurnin::kNone) return s.slow_start_lr;
    return s.slow_start_lr + (s.lr - s.slow_start_lr) * static_cast<double>(step) /
                                 static_cast<double>(s.slow_start_steps);
  }
  // With a burn-in the main schedule starts counting after the slow start (DeepLab).
  const int64_t t = s.burnin == SlowStartBurnin::kNone ? step : step - s.slow_start_steps;
  switch (s.kind) {
    case LrScheduleKind::kConstant:
      return t < s.warmup_steps ? lr_linear_warmup(s.lr, s.warmup_init, s.warmup_steps, t) : s.lr;
    case LrScheduleKind::kStepwise:
      return lr_stepwise(s.lr, s.warmup_init, s.warmup_steps, s.first_drop_step, s.second_drop_step,
                         t);
    case LrScheduleKind::kCosine:
      return lr_cosine(s.lr, s.warmup_init, s.warmup_steps, s.total_steps, t);
    case LrScheduleKind::kCosineWarmup:
      return lr_cosine_after_warmup(s.lr, s.warmup_init, s.warmup_steps, s.total_steps, t);
    case LrScheduleKind::kPolynomial:
      return lr_polynomial(s.lr, s.warmup_init, s.warmup_steps, s.power, s.total_steps, t);
    case LrScheduleKind::kStep:
      return lr_exponential_staircase(s.lr, s.decay_steps, s.decay_factor, t);
    case LrScheduleKind::kPoly:
      return lr_poly_decay(s.lr, s.total_steps, s.power, t);
  }
  return s.lr;
}

}  // namespace detseg
