// Implements: learning-rate schedules as pure functions of the step: EfficientDet's stepwise,
// cosine (two variants) and polynomial with linear warm-up, DeepLab's step and poly, and a slow
// start for the first steps. ScheduleOptions (schedule_options.h) holds the config values;
// resolve_schedule turns epochs into steps and scales the rate with the batch size once,
// learning_rate_at is then cheap.
#pragma once

#include <cstdint>
#include <string>

#include "detseg/train/schedule_options.h"

namespace detseg {

enum class LrScheduleKind {
  kConstant,      // the adjusted rate at every step (after warm-up)
  kStepwise,      // warm-up, then x1, x0.1, x0.01 at the two drop steps
  kCosine,        // warm-up, then 0.5 lr (1 + cos(pi step / total))
  kCosineWarmup,  // warm-up up to and incl. the warm-up step, then cosine over total - warm-up
  kPolynomial,    // warm-up, then lr (1 - step / total)^power
  kStep,          // DeepLab: lr decay_factor^floor(step / decay_steps)
  kPoly,          // DeepLab: lr (1 - min(step, total) / total)^power, ending at 0
};

enum class SlowStartBurnin { kNone, kLinear };

// Everything resolved to steps and an absolute rate.
struct Schedule {
  LrScheduleKind kind = LrScheduleKind::kCosine;
  double lr = 0.08;  // adjusted (batch-scaled) rate
  double warmup_init = 0.008;
  int64_t warmup_steps = 0;
  int64_t first_drop_step = 0;
  int64_t second_drop_step = 0;
  int64_t total_steps = 1;
  double power = 0.9;
  int64_t decay_steps = 2000;
  double decay_factor = 0.1;
  int64_t slow_start_steps = 0;
  double slow_start_lr = 1e-4;
  SlowStartBurnin burnin = SlowStartBurnin::kNone;
};

// Unknown names throw ConfigError listing the valid ones.
LrScheduleKind parse_lr_schedule_kind(const std::string& name);
SlowStartBurnin parse_slow_start_burnin(const std::string& name);
const char* lr_schedule_name(LrScheduleKind kind);

// Validates the options (ConfigError naming the key) and derives step counts and the rate.
Schedule resolve_schedule(const ScheduleOptions& options);

// The learning rate at `step` (0-based, the number of updates already applied).
double learning_rate_at(const Schedule& schedule, int64_t step);

// The single formulas, exposed for tests and for callers that need one piece.
double lr_linear_warmup(double lr, double warmup_init, int64_t warmup_steps, int64_t step);
double lr_stepwise(double lr, double warmup_init, int64_t warmup_steps, int64_t first_drop,
                   int64_t second_drop, int64_t step);
double lr_cosine(double lr, double warmup_init, int64_t warmup_steps, int64_t total, int64_t step);
double lr_cosine_after_warmup(double lr, double warmup_init, int64_t warmup_steps, int64_t total,
                              int64_t step);
double lr_polynomial(double lr, double warmup_init, int64_t warmup_steps, double power,
                     int64_t total, int64_t step);
double lr_exponential_staircase(double lr, int64_t decay_steps, double decay_factor, int64_t step);
double lr_poly_decay(double lr, int64_t total, double power, int64_t step);

}  // namespace detseg
