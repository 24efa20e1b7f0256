#include "detseg/engine/device.h"

#include <ATen/autocast_mode.h>
#include <ATen/Context.h>
#include <ATen/Version.h>
#include <torch/nn/module.h>

#include <cstdlib>

#include "detseg/core/cpu_info.h"
#include "detseg/core/error.h"

namespace detseg {

std::string machine_summary() {
  std::string out = cpu_summary() + "; ATen CPU capability " + at::get_cpu_capability();
  if (const char* v = std::getenv("ATEN_CPU_CAPABILITY"); v != nullptr && *v != '\0')
    out += std::string(" (ATEN_CPU_CAPABILITY=") + v + ")";
  return out;
}

int visible_gpu_count() {
  return at::hasCUDA() ? static_cast<int>(at::getNumGPUs()) : 0;
}

at::Device module_device(const torch::nn::Module& module) {
  for (const auto& p : module.parameters()) return p.device();
  for (const auto& b : module.buffers()) return b.device();
  return at::Device(at::kCPU);
}

at::Device resolve_device(const std::string& spec) {
  if (spec == "cpu") return at::Device(at::kCPU);
  const int gpus = visible_gpu_count();
  int local_rank = 0;
  if (const char* v = std::getenv("LOCAL_RANK"); v != nullptr && *v != '\0') local_rank = std::atoi(v);
  if (spec == "auto") return gpus > 0 ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank % gpus))
                                      : at::Device(at::kCPU);
  DETSEG_CONFIG_CHECK(spec == "cuda" || spec.rfind("cuda:", 0) == 0, "",
                      "device: expected auto, cpu, cuda or cuda:N, got '", spec, "'");
  if (gpus == 0) {
    const char* why = at::hasCUDA() ? "no GPU is visible" : "no CUDA GPU or driver is visible to this build";
    throw ConfigError(str("device ", spec, ": ", why, "; use --device cpu"));
  }
  const int index = spec == "cuda" ? local_rank : std::atoi(spec.c_str() + 5);
  DETSEG_CONFIG_CHECK(index >= 0 && index < gpus, "", "device ", spec, ": only ", gpus, " GPU",
                      gpus == 1 ? "" : "s", " visible (cuda:0", gpus > 1 ? str("..cuda:", gpus - 1) : std::string(),
                      ")");
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
}

AutocastScope::AutocastScope(const at::Device& device, const std::string& mixed_precision) {
  if (mixed_precision == "none") return;
  DETSEG_CONFIG_CHECK(mixed_precision == "bf16" || mixed_precision == "fp16", "",
                      "train.mixed_precision: expected none, bf16 or fp16, got '", mixed_precision, "'");
  type_ = device.type();
  was_enabled_ = at::autocast::is_autocast_enabled(type_);
  previous_dtype_ = at::autocast::get_autocast_dtype(type_);
  at::autocast::set_autocast_dtype(type_, mixed_precision == "bf16" ? at::kBFloat16 : at::kHalf);
  at::autocast::set_autocast_enabled(type_, true);
  at::autocast::increment_nesting();
  active_ = true;
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // The weight casts autocast caches live until the outermost scope closes, as in torch.autocast.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(type_, was_enabled_);
  at::autocast::set_autocast_dtype(type_, previous_dtype_);
}

}  // namespace detseg
