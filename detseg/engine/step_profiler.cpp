#include "detseg/engine/step_profiler.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/log.h"

namespace detseg {
namespace {

bool is_phase(const std::string& name) {
  return name.rfind("detseg::", 0) == 0 || name.rfind("autograd::engine::evaluate_function:", 0) == 0;
}

std::string fixed(double x, int decimals) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.*f", decimals, x);
  return text;
}

std::string padded(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

struct OpTotals {
  double self_ms = 0, total_ms = 0;
  int64_t calls = 0;
  std::map<std::string, double> callers;  // caller chain -> self ms
};

}  // namespace

std::string profile_table(const std::vector<ProfiledEvent>& events, uint64_t thread, int64_t steps, size_t top_ops) {
  DETSEG_CHECK(steps > 0, "profile_table: no steps");
  std::vector<const ProfiledEvent*> own;
  double other_threads_ms = 0;
  for (const ProfiledEvent& e : events) {
    if (e.thread == thread) {
      own.push_back(&e);
    } else {
      other_threads_ms += static_cast<double>(e.end_ns - e.start_ns) / 1e6;  // nested ones counted too: a bound
    }
  }
  // Outer events first: by start, the longer one first when two start together (and the profiler's
  // order, parent before child, when they also end together).
  std::stable_sort(own.begin(), own.end(), [](const ProfiledEvent* a, const ProfiledEvent* b) {
    return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->end_ns > b->end_ns;
  });
  std::map<std::string, OpTotals> ops;
  std::map<std::string, double> phases;
  std::vector<const ProfiledEvent*> stack;
  std::vector<double> child_ms;  // time of the events nested directly in each stack entry
  double wall_ms = 0;             // the outermost events' time
  auto close = [&]() {
    const ProfiledEvent* e = stack.back();
    const double ms = static_cast<double>(e->end_ns - e->start_ns) / 1e6;
    const double self = std::max(0.0, ms - child_ms.back());
    stack.pop_back();
    child_ms.pop_back();
    // A phase's time outside any op (host code between ops) is listed with the ops, as its self time.
    if (e->name.rfind("detseg::", 0) == 0) phases[e->name] += ms;
    OpTotals& op = ops[e->name];
    op.self_ms += self;
    op.total_ms += ms;
    op.calls += 1;
    std::string chain;
    int ops_named = 0;
    for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
      if (is_phase((*it)->name)) {
        chain += (chain.empty() ? "[" : " [") + (*it)->name + "]";
        break;
      }
      if (ops_named < 2) chain += (chain.empty() ? "" : " < ") + (*it)->name;
      ++ops_named;
    }
    op.callers[chain.empty() ? "(top level)" : chain] += self;
    if (!child_ms.empty()) child_ms.back() += ms;
    else wall_ms += ms;
  };
  for (const ProfiledEvent* e : own) {
    while (!stack.empty() && stack.back()->end_ns <= e->start_ns) close();
    stack.push_back(e);
    child_ms.push_back(0);
  }
  while (!stack.empty()) close();

  const double n = static_cast<double>(steps);
  std::string out = "time a step in profiled events on the training thread: " + fixed(wall_ms / n, 1) + " ms";
  if (other_threads_ms > 0) out += " (other threads' events: " + fixed(other_threads_ms / n, 1) + " ms)";
  out += "\n";
  if (!phases.empty()) {
    out += "\n" + padded("phase", 44) + "   ms/step   share\n";
    std::vector<std::pair<std::string, double>> sorted(phases.begin(), phases.end());
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    for (const auto& [name, ms] : sorted)
      out += padded(name, 44) + " " + padded(fixed(ms / n, 2), 9) + " " +
             fixed(wall_ms > 0 ? 100.0 * ms / wall_ms : 0.0, 1) + " %\n";
  }
  std::vector<std::pair<std::string, const OpTotals*>> sorted;
  for (const auto& [name, op] : ops) sorted.push_back({name, &op});
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second->self_ms > b.second->self_ms; });
  out += "\n" + padded("op (by self time)", 44) + " calls/step  self ms/step  share   total ms/step  largest callers\n";
  for (size_t i = 0; i < sorted.size() && i < top_ops; ++i) {
    const auto& [name, op] = sorted[i];
    std::vector<std::pair<std::string, double>> callers(op->callers.begin(), op->callers.end());
    std::sort(callers.begin(), callers.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    std::string who;
    for (size_t c = 0; c < callers.size() && c < 3; ++c)
      who += (c ? "; " : "") + callers[c].first + " " +
             fixed(op->self_ms > 0 ? 100.0 * callers[c].second / op->self_ms : 0.0, 0) + " %";
    out += padded(name, 44) + " " + padded(fixed(static_cast<double>(op->calls) / n, 1), 11) + " " +
           padded(fixed(op->self_ms / n, 2), 12) + " " +
           padded(fixed(wall_ms > 0 ? 100.0 * op->self_ms / wall_ms : 0.0, 1) + " %", 7) + " " +
           padded(fixed(op->total_ms / n, 2), 14) + " " + who + "\n";
  }
  return out;
}

StepProfiler::StepProfiler(const ProfileConfig& config, int64_t run_start, std::string model_dir, bool main_process,
                           bool cuda)
    : first_(config.steps > 0 ? run_start + config.warmup + 1 : 0),
      last_(config.steps > 0 ? run_start + config.warmup + config.steps : -1),
      out_dir_(std::move(model_dir) + "/profile"),
      main_process_(main_process),
      cuda_(cuda) {}

StepProfiler::~StepProfiler() {
  if (!active_) return;
  try {
    torch::autograd::profiler::disableProfiler();  // the run ended early (an error or a stop): nothing written
  } catch (...) {
  }
}

void StepProfiler::before_step(int64_t steps_done) {
  if (steps_done + 1 != first_ || active_) return;
  // Kineto's own log would print raw lines such as a failed GPU count on a machine without one;
  // errors that matter reach us as exceptions. KINETO_LOG_LEVEL set by the user wins.
  setenv("KINETO_LOG_LEVEL", "5", /*overwrite=*/0);
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO,
                                                     /*report_input_shapes=*/true);
  std::set<ActivityType> activities = {ActivityType::CPU};
  if (cuda_) {
    activities.insert(ActivityType::CUDA);
    torch::cuda::synchronize();
  }
  prof::prepareProfiler(config, activities);
  prof::enableProfiler(config, activities);
  thread_ = at::RecordFunction::currentThreadId();
  active_ = true;
}

void StepProfiler::after_step(int64_t steps_done) {
  if (active_ && steps_done == last_) finish(steps_done);
}

void StepProfiler::end_of_run(int64_t steps_done) {
  if (active_) {
    finish(steps_done);
  } else if (first_ > steps_done && main_process_) {
    log_warn("train.profile: no step profiled; the run ended at step ", steps_done, " before step ", first_,
             " (lower train.profile.warmup)");
  }
}

void StepProfiler::finish(int64_t last_step) {
  if (cuda_) torch::cuda::synchronize();
  const auto result = torch::autograd::profiler::disableProfiler();
  active_ = false;
  if (!main_process_) return;
  make_directories(out_dir_);
  const std::string stem = out_dir_ + "/steps-" + std::to_string(first_) + "-" + std::to_string(last_step);
  std::vector<ProfiledEvent> events;
  double kernel_ms = 0;
  for (const auto& e : result->events()) {
    if (e.deviceType() == c10::DeviceType::CUDA) {
      kernel_ms += static_cast<double>(e.durationNs()) / 1e6;
      continue;
    }
    if (e.isAsync() || e.endNs() < e.startNs()) continue;
    events.push_back({e.name(), e.startThreadId(), e.startNs(), e.endNs()});
  }
  const int64_t steps = last_step - first_ + 1;
  std::string table = "profile of steps " + std::to_string(first_) + "-" + std::to_string(last_step) + "\n" +
                      profile_table(events, thread_, steps, 40);
  if (cuda_) table += "GPU kernels: " + fixed(kernel_ms / static_cast<double>(steps), 2) + " ms a step\n";
  write_file_atomic(stem + "-ops.txt", table);
  result->save(stem + ".trace.json");  // chrome://tracing or ui.perfetto.dev
  log_info("profile of steps ", first_, "-", last_step, " written to ", stem, "-ops.txt (op table) and ", stem,
           ".trace.json (Chrome trace)");
}

}  // namespace detseg
