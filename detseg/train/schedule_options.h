// Implements: the learning-rate schedule's options, one struct for both the pipeline config
// (train.schedule.*, declared in config.cpp) and train/schedules.h. Torch-free so config.h can
// hold it. Defaults are the config's; the batch, step count and epoch values the config does not
// carry are filled in by the caller (the train loop sets global_batch and total_steps).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace detseg {

// Step counts left at -1 (and drop_steps left empty) are derived from epochs: steps_per_epoch =
// examples_per_epoch / global_batch, step = int(epochs * steps_per_epoch) (as the reference).
struct ScheduleOptions {
  std::string type = "constant";  // constant|stepwise|cosine|cosine_warmup|polynomial|step|poly
  double learning_rate = 0.01;    // base rate, for a global batch of lr_base_batch when scaled
  bool scale_by_batch = false;    // rate x global_batch / lr_base_batch (EfficientDet's rule)
  int64_t warmup_steps = 0;       // -1: from warmup_epochs
  double warmup_init = 0.0;       // rate at step 0 of the warm-up
  std::vector<int64_t> drop_steps;  // stepwise: the x0.1 and x0.01 drops; empty: from epochs
  double power = 0.9;               // polynomial / poly
  double decay_factor = 0.1;        // DeepLab step: factor per period
  int64_t decay_steps = 1000;       // DeepLab step: staircase period
  int64_t slow_start_steps = 0;     // first steps at the slow-start rate (0: off)
  double slow_start_learning_rate = 1e-4;
  std::string slow_start_burnin = "none";  // none|linear

  // Not config keys: filled at use.
  int64_t lr_base_batch = 64;
  int64_t global_batch = 64;  // per-replica batch x replicas
  int64_t total_steps = -1;   // -1: from num_epochs
  int64_t examples_per_epoch = 120000;
  double num_epochs = 300;
  double warmup_epochs = 1.0;
  double first_drop_epoch = 200;
  double second_drop_epoch = 250;
};

}  // namespace detseg
