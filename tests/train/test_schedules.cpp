// Implements: tests of the learning-rate schedules against hand-worked values of the reference
// formulas (EfficientDet det_model_fn.py and DeepLab train_utils.py).
#include <gtest/gtest.h>

#include "detseg/core/error.h"
#include "detseg/train/schedules.h"

namespace detseg {
namespace {

// lr 0.08 per 64 images, batch 128 -> 0.16; 1280 examples / 128 = 10 steps per epoch:
// warm-up 10 steps, drops at 30 and 40, 50 steps in all.
ScheduleOptions efficientdet_options(const std::string& method) {
  ScheduleOptions o;
  o.type = method;
  o.learning_rate = 0.08;
  o.scale_by_batch = true;
  o.global_batch = 128;
  o.examples_per_epoch = 1280;
  o.warmup_epochs = 1;
  o.warmup_steps = -1;  // from the epochs
  o.warmup_init = 0.008;
  o.first_drop_epoch = 3;
  o.second_drop_epoch = 4;
  o.num_epochs = 5;
  o.power = 0.9;
  return o;
}

double lr(const ScheduleOptions& o, int64_t step) {
  return learning_rate_at(resolve_schedule(o), step);
}

TEST(Schedules, ResolveScalesRateAndDerivesSteps) {
  const Schedule s = resolve_schedule(efficientdet_options("stepwise"));
  EXPECT_DOUBLE_EQ(s.lr, 0.16);
  EXPECT_EQ(s.warmup_steps, 10);
  EXPECT_EQ(s.first_drop_step, 30);
  EXPECT_EQ(s.second_drop_step, 40);
  EXPECT_EQ(s.total_steps, 50);
  // Steps per epoch need not be whole: 1000 / 64 = 15.625, and int() truncates.
  ScheduleOptions o = efficientdet_options("cosine");
  o.global_batch = 32;
  o.examples_per_epoch = 1000;
  o.num_epochs = 3;
  const Schedule t = resolve_schedule(o);
  EXPECT_DOUBLE_EQ(t.lr, 0.04);
  EXPECT_EQ(t.warmup_steps, 31);  // 1000 / 32 = 31.25
  EXPECT_EQ(t.total_steps, 93);   // 93.75
  o.scale_by_batch = false;
  o.total_steps = 7;
  EXPECT_DOUBLE_EQ(resolve_schedule(o).lr, 0.08);
  EXPECT_EQ(resolve_schedule(o).total_steps, 7);
}

TEST(Schedules, Stepwise) {
  const auto o = efficientdet_options("stepwise");
  EXPECT_DOUBLE_EQ(lr(o, 0), 0.008);
  EXPECT_NEAR(lr(o, 5), 0.084, 1e-12);  // 0.008 + 5/10 (0.16 - 0.008)
  EXPECT_NEAR(lr(o, 9), 0.1448, 1e-12);
  EXPECT_DOUBLE_EQ(lr(o, 10), 0.16);  // warm-up end
  EXPECT_DOUBLE_EQ(lr(o, 29), 0.16);
  EXPECT_NEAR(lr(o, 30), 0.016, 1e-15);  // first drop x0.1
  EXPECT_NEAR(lr(o, 39), 0.016, 1e-15);
  EXPECT_NEAR(lr(o, 40), 0.0016, 1e-15);  // second drop x0.01
  EXPECT_NEAR(lr(o, 50), 0.0016, 1e-15);  // last step
}

TEST(Schedules, StepwiseWithExplicitDropSteps) {
  auto o = efficientdet_options("stepwise");
  o.drop_steps = {20, 45};  // the config's train.schedule.drop_steps; the epochs are then unused
  const Schedule s = resolve_schedule(o);
  EXPECT_EQ(s.first_drop_step, 20);
  EXPECT_EQ(s.second_drop_step, 45);
  EXPECT_DOUBLE_EQ(lr(o, 19), 0.16);
  EXPECT_NEAR(lr(o, 20), 0.016, 1e-15);
  EXPECT_NEAR(lr(o, 44), 0.016, 1e-15);
  EXPECT_NEAR(lr(o, 45), 0.0016, 1e-15);
  o.drop_steps = {20};
  EXPECT_THROW(resolve_schedule(o), ConfigError);
  o.drop_steps = {30, 20};
  EXPECT_THROW(resolve_schedule(o), ConfigError);
}

TEST(Schedules, CosineDecaysOverAllSteps) {
  const auto o = efficientdet_options("cosine");
  EXPECT_DOUBLE_EQ(lr(o, 0), 0.008);
  EXPECT_NEAR(lr(o, 5), 0.084, 1e-12);
  // At the warm-up end the cosine is already 20% through its period: 0.08 (1 + cos(0.2 pi)).
  EXPECT_NEAR(lr(o, 10), 0.1447213595499958, 1e-12);
  EXPECT_NEAR(lr(o, 25), 0.08, 1e-12);
  EXPECT_NEAR(lr(o, 50), 0.0, 1e-12);
}

TEST(Schedules, CosineFromWarmupEnd) {
  const auto o = efficientdet_options("cosine_warmup");
  EXPECT_DOUBLE_EQ(lr(o, 0), 0.008);
  EXPECT_NEAR(lr(o, 5), 0.084, 1e-12);
  EXPECT_NEAR(lr(o, 10), 0.16, 1e-12);                 // warm-up includes its last step
  EXPECT_NEAR(lr(o, 11), 0.15975338669865025, 1e-12);  // 0.16/2 (1 + cos(pi/40))
  EXPECT_NEAR(lr(o, 30), 0.08, 1e-12);
  EXPECT_NEAR(lr(o, 50), 0.0, 1e-12);
}

TEST(Schedules, PolynomialWithWarmup) {
  const auto o = efficientdet_options("polynomial");
  EXPECT_DOUBLE_EQ(lr(o, 0), 0.008);
  EXPECT_NEAR(lr(o, 5), 0.084, 1e-12);
  EXPECT_NEAR(lr(o, 10), 0.13088834336813734, 1e-12);  // 0.16 0.8^0.9
  EXPECT_NEAR(lr(o, 25), 0.08574187700290345, 1e-12);  // 0.16 0.5^0.9
  EXPECT_NEAR(lr(o, 49), 0.004732024437210608, 1e-12);
  EXPECT_DOUBLE_EQ(lr(o, 50), 0.0);
  EXPECT_DOUBLE_EQ(lr(o, 60), 0.0);  // held at 0 past the end instead of NaN
}

ScheduleOptions deeplab_options(const std::string& method) {
  ScheduleOptions o;
  o.type = method;
  o.learning_rate = 0.01;
  o.scale_by_batch = false;
  o.total_steps = 1000;
  o.warmup_steps = 0;
  o.decay_steps = 100;
  o.decay_factor = 0.1;
  o.power = 0.9;
  return o;
}

TEST(Schedules, DeepLabStepIsAnExponentialStaircase) {
  const auto o = deeplab_options("step");
  EXPECT_DOUBLE_EQ(lr(o, 0), 0.01);
  EXPECT_DOUBLE_EQ(lr(o, 99), 0.01);
  EXPECT_NEAR(lr(o, 100), 0.001, 1e-15);
  EXPECT_NEAR(lr(o, 250), 0.0001, 1e-16);
  EXPECT_NEAR(lr(o, 1000), 1e-12, 1e-20);
}

TEST(Schedules, DeepLabPolyEndsAtZero) {
  const auto o = deeplab_options("poly");
  EXPECT_DOUBLE_EQ(lr(o, 0), 0.01);
  EXPECT_NEAR(lr(o, 500), 0.005358867312681466, 1e-14);
  EXPECT_DOUBLE_EQ(lr(o, 1000), 0.0);
  EXPECT_DOUBLE_EQ(lr(o, 1200), 0.0);  // the step is capped at the total
}

TEST(Schedules, SlowStartWithoutBurnin) {
  auto o = deeplab_options("poly");
  o.slow_start_steps = 10;
  o.slow_start_learning_rate = 1e-4;
  EXPECT_DOUBLE_EQ(lr(o, 0), 1e-4);
  EXPECT_DOUBLE_EQ(lr(o, 9), 1e-4);
  // No burn-in: the main schedule is not shifted, step 10 is poly(10).
  EXPECT_NEAR(lr(o, 10), 0.01 * std::pow(1 - 10 / 1000.0, 0.9), 1e-15);
}

TEST(Schedules, SlowStartLinearBurninShiftsTheSchedule) {
  auto o = deeplab_options("poly");
  o.slow_start_steps = 10;
  o.slow_start_learning_rate = 1e-4;
  o.slow_start_burnin = "linear";
  EXPECT_DOUBLE_EQ(lr(o, 0), 1e-4);
  EXPECT_NEAR(lr(o, 5), 0.00505, 1e-15);                 // 1e-4 + (0.01 - 1e-4) 5/10
  EXPECT_DOUBLE_EQ(lr(o, 10), 0.01);                     // poly(0)
  EXPECT_NEAR(lr(o, 510), 0.005358867312681466, 1e-14);  // poly(500)
  o.type = "step";
  EXPECT_DOUBLE_EQ(lr(o, 109), 0.01);
  EXPECT_NEAR(lr(o, 110), 0.001, 1e-15);
}

TEST(Schedules, ConstantWithWarmup) {
  auto o = efficientdet_options("constant");
  EXPECT_DOUBLE_EQ(lr(o, 0), 0.008);
  EXPECT_DOUBLE_EQ(lr(o, 10), 0.16);
  EXPECT_DOUBLE_EQ(lr(o, 1000), 0.16);
}

TEST(Schedules, UnknownNamesAndBadValuesAreConfigErrors) {
  auto o = efficientdet_options("linear_cosine");
  try {
    resolve_schedule(o);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'linear_cosine'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("stepwise"), std::string::npos) << e.what();
  }
  o = efficientdet_options("poly");
  o.slow_start_burnin = "exp";
  EXPECT_THROW(resolve_schedule(o), ConfigError);
  o = efficientdet_options("cosine");
  o.learning_rate = -1;
  EXPECT_THROW(resolve_schedule(o), ConfigError);
  o = efficientdet_options("cosine_warmup");
  o.warmup_steps = 50;
  EXPECT_THROW(resolve_schedule(o), ConfigError);
  o = efficientdet_options("cosine");
  o.num_epochs = 0;
  EXPECT_THROW(resolve_schedule(o), ConfigError);
  EXPECT_THROW(learning_rate_at(resolve_schedule(efficientdet_options("cosine")), -1), Error);
}

}  // namespace
}  // namespace detseg
