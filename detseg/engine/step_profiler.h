// Implements: train.profile: an op-level profile of a few training steps by torch's profiler (the
// ops the training thread runs and, on a GPU, their kernels): a Chrome trace, and a table of the
// step's phases and of each op's self time with the ops that called it. This is how to find where
// a step's time goes without a system profiler (perf's call graphs take longer than the run).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "detseg/config/config.h"
#include "detseg/core/profile_scope.h"  // the phases it names

namespace detseg {

// One timed event of the profile: an op (aten::...), a phase scope (detseg::...) or an autograd node.
struct ProfiledEvent {
  std::string name;
  uint64_t thread = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

// The table of `events` from `steps` steps on thread `thread` (other threads are summed in one
// line): the detseg:: phases by inclusive time, then the ops by self time (their time less the
// events nested in them), each with its share and its three largest callers, the call chain of
// up to two enclosing ops and the nearest enclosing phase or autograd node, e.g.
// "aten::clone < aten::contiguous [autograd::engine::evaluate_function: ConvolutionBackward0]".
std::string profile_table(const std::vector<ProfiledEvent>& events, uint64_t thread, int64_t steps, size_t top_ops);

class StepProfiler {
 public:
  // Profiles config.steps steps after config.warmup steps of this run, which starts at step
  // `run_start` (the loop's count of steps done); the main process writes model_dir/profile/.
  StepProfiler(const ProfileConfig& config, int64_t run_start, std::string model_dir, bool main_process,
               bool cuda);
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  void before_step(int64_t steps_done);  // starts the profile before its first step
  void after_step(int64_t steps_done);   // ends it after its last step and writes the files
  // After the loop: a profile the run's end cut short is written with the steps it has; one that
  // never started (warmup reached past the run's last step) is a warning.
  void end_of_run(int64_t steps_done);

 private:
  void finish(int64_t last_step);
  int64_t first_ = 0, last_ = 0;  // profiled steps first_..last_ (1-based, as logged)
  std::string out_dir_;
  bool main_process_ = true, cuda_ = false, active_ = false;
  uint64_t thread_ = 0;
};

}  // namespace detseg
