// Implements: where a run computes: the device a config's `device` names (auto: the GPU of this
// worker's LOCAL_RANK when CUDA is visible, else the CPU), and the mixed-precision scope of
// train.mixed_precision.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "detseg/train/torch_fwd.h"

namespace detseg {

// "auto" | "cpu" | "cuda" | "cuda:N". Throws ConfigError ("device cuda: ...") when CUDA is named
// but this build or machine has no usable GPU, or N is out of range.
at::Device resolve_device(const std::string& spec);

// The device of the module's first parameter (or buffer); CPU for a module with neither.
at::Device module_device(const torch::nn::Module& module);

// The CPU and the kernel sets this process computes with, for figures and test notes: the CPU model
// and oneDNN's ISA (core/cpu_info.h) and ATen's CPU capability, each with the variable that lowered
// it when one is set: "AMD EPYC 7B13, 2 logical CPUs; oneDNN ISA avx2; ATen CPU capability AVX2".
std::string machine_summary();

// GPUs this process can use (0 without a CUDA build or driver).
int visible_gpu_count();

// Autocast for the forward pass while alive: "bf16" or "fp16" on `device` ("none": nothing).
// Ops autocast lists as precision-sensitive (losses, softmax, norms) still run in fp32, and the
// losses cast their inputs to fp32 themselves.
class AutocastScope {
 public:
  AutocastScope(const at::Device& device, const std::string& mixed_precision);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  at::DeviceType type_ = at::kCPU;
  bool active_ = false, was_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

}  // namespace detseg
