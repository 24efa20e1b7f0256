#include "detseg/engine/memory.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <new>
#include <sstream>

#include "detseg/core/error.h"
#include "detseg/core/log.h"
#include "detseg/core/out_of_memory.h"
#include "detseg/models/build.h"

namespace detseg {
namespace {

// Below this a block is not checked: the check reads /proc, and a block this small cannot be what
// stops a run.
constexpr size_t kCheckFrom = size_t{256} << 20;

// The first line of `path`, or "" when it cannot be read.
std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// What the process's cgroup (v2) still allows, or -1 when it sets no limit.
int64_t cgroup_bytes_left() {
  std::ifstream self("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(self, line))
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  if (path.empty()) return -1;
  const std::string dir = "/sys/fs/cgroup" + (path == "/" ? std::string() : path);
  const std::string max = first_line(dir + "/memory.max"), current = first_line(dir + "/memory.current");
  if (max.empty() || max == "max" || current.empty()) return -1;
  try {
    return std::max<int64_t>(0, std::stoll(max) - std::stoll(current));
  } catch (const std::exception&) {
    return -1;
  }
}

int64_t parameter_count(const PipelineConfig& config, int64_t num_classes) {
  PipelineConfig probe = config;
  probe.model.num_classes = num_classes;
  torch::NoGradGuard no_grad;
  const std::shared_ptr<ModelImpl> model = build_model(probe);
  int64_t n = 0;
  for (const auto& p : model->parameters(true)) n += p.numel();
  for (const auto& b : model->buffers(true)) n += b.numel();
  return n;
}

// Optimizer state per parameter, in copies of the weights.
int optimizer_copies(const std::string& type) {
  if (type == "adam" || type == "adamw" || type == "rmsprop") return 2;  // two moments; RMSprop's square average and momentum
  if (type == "sgd") return 0;
  return 1;  // momentum
}

class GuardedCpuAllocator final : public c10::Allocator {
 public:
  explicit GuardedCpuAllocator(c10::Allocator* base) : base_(base) {}
  c10::DataPtr allocate(size_t n) override {
    if (n >= kCheckFrom) {
      const int64_t available = available_memory_bytes();
      if (available >= 0 && static_cast<double>(n) > static_cast<double>(available))
        C10_THROW_ERROR(OutOfMemoryError, str("out of memory: a block of ", gigabytes(static_cast<double>(n)),
                                              " was asked for, and ", gigabytes(static_cast<double>(available)),
                                              " of memory is available"));
    }
    return base_->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return base_->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { base_->copy_data(dest, src, count); }

 private:
  c10::Allocator* base_;
};

}  // namespace

int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0, available = -1, swap = 0;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemAvailable:") available = kb * 1024;
    if (key == "SwapFree:") swap = kb * 1024;
  }
  const int64_t host = available < 0 ? -1 : available + swap;
  const int64_t cgroup = cgroup_bytes_left();
  if (host < 0) return cgroup;
  return cgroup < 0 ? host : std::min(host, cgroup);
}

std::string gigabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), bytes < 1e9 ? "%.2f GB" : "%.1f GB", bytes / 1e9);
  return text;
}

void check_model_fits_in_memory(const PipelineConfig& config, ModelUse use) {
  const int64_t k = config.model.num_classes;
  if (k < 1000) return;
  int64_t one = 0, two = 0;
  try {
    one = parameter_count(config, 1);
    two = parameter_count(config, 2);
  } catch (const std::exception& e) {
    log_debug("no memory estimate for model.num_classes ", k, ": ", e.what());
    return;
  }
  const double parameters = static_cast<double>(one) + static_cast<double>(two - one) * static_cast<double>(k - 1);
  const double weights = parameters * 4;  // float32
  const int64_t available = available_memory_bytes();
  if (available < 0) return;
  char count[32];
  std::snprintf(count, sizeof(count), parameters >= 1e9 ? "%.2f G" : "%.1f M", parameters / (parameters >= 1e9 ? 1e9 : 1e6));
  std::string needs = str("a ", config.model.type, " with ", k, " classes has ", count, " parameters (",
                          gigabytes(weights), ")");
  double needed = weights;
  if (use == ModelUse::kTraining) {
    const int state = optimizer_copies(config.train.optimizer.type);
    const int ema = config.train.moving_average_decay > 0 ? 1 : 0;
    needed = weights * (2 + state + ema);
    const std::string& type = config.train.optimizer.type;
    const std::string kept = type == "adam" || type == "adamw" ? ", Adam's two moments"
                             : type == "rmsprop"               ? ", RMSprop's square average and momentum"
                             : state > 0                       ? ", the momentum"
                                                               : "";
    needs += str("; training needs at least ", gigabytes(needed), " for them (weights, gradients", kept,
                 ema ? ", the EMA copy" : "", ")");
  }
  DETSEG_CONFIG_CHECK(needed <= static_cast<double>(available), location(config.source), "model.num_classes ", k, ": ", needs,
               ", more than the ", gigabytes(static_cast<double>(available)), " of memory available");
}

void rethrow_if_out_of_memory(const std::exception& e, const std::string& doing) {
  const std::string text = dynamic_cast<const std::bad_alloc*>(&e) ? "out of memory" : out_of_memory_text(e.what());
  if (!text.empty()) throw Error(doing + ": " + text);
}

void guard_cpu_allocations() {
  static std::once_flag once;
  std::call_once(once, [] {
    static GuardedCpuAllocator guard(c10::GetCPUAllocator());
    c10::SetCPUAllocator(&guard, /*priority=*/100);
  });
}

}  // namespace detseg
