// Implements: the training loop's record, kept on the device, of whether its steps stayed finite,
// so that the host reads it (one sync) only on the steps that log, save, evaluate or stop, not on
// every step. A step whose gradients are not finite is skipped by the optimizer itself
// (TrainOptimizer::step), so the weights stay good between two reads.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace detseg {

class StepHealth {
 public:
  // fp16: a skipped step is an overflow, expected now and then; only a run of more than
  // `max_overflow_run` skips in a row is a failure. Otherwise every skipped step is one.
  StepHealth(bool fp16, int64_t max_overflow_run = 50) : fp16_(fp16), max_overflow_run_(max_overflow_run) {}

  // After step `step_number` (numbered from 1, as metrics.jsonl numbers them) was taken or skipped:
  // `skipped` is its 0-dim float skip flag, `total` the loss with L2, `l2` the L2 term, `parts` the
  // named loss parts. No host sync.
  void record(int64_t step_number, const at::Tensor& total, const at::Tensor& grad_norm, const at::Tensor& l2,
              const std::vector<std::pair<std::string, at::Tensor>>& parts, const at::Tensor& skipped);

  // The host's view, read with one sync. `latest` is the last recorded step's values; `failure` the
  // first failed step since the previous read (step < 0: none); then the record starts afresh.
  struct Values {
    double total = 0, grad_norm = 0, l2 = 0;
    std::vector<std::pair<std::string, double>> parts;
    bool loss_finite() const;
    std::string parts_text() const;  // " name=value" for each part
  };
  struct Reading {
    Values latest;
    int64_t failed_step = -1;
    Values failure;
    int64_t skipped_steps = 0;  // since the previous read (fp16 overflows, or the failure)
  };
  Reading read();

 private:
  bool fp16_;
  int64_t max_overflow_run_;
  std::vector<std::string> part_names_;
  at::Tensor latest_;       // double [3 + parts]: total, grad norm, L2, parts
  at::Tensor failure_;      // the same, at failed_step_
  at::Tensor failed_step_;  // double 0-dim, -1 while none
  at::Tensor skipped_;      // double 0-dim: skipped steps since the last read
  at::Tensor overflow_run_; // double 0-dim: skipped steps in a row
};

}  // namespace detseg
