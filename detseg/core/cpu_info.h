// Implements: which CPU a figure or a test result came from, and which kernel sets ran on it. The
// same program rounds differently on another CPU because ATen and oneDNN pick their vector kernels
// at start-up (ATEN_CPU_CAPABILITY and ONEDNN_MAX_CPU_ISA lower the choice), so every benchmark
// figure and `detseg info` name them. Torch-free: ATen's own answer (at::get_cpu_capability) is
// added by those that link LibTorch (engine/device.h, machine_summary).
#pragma once

#include <string>

namespace detseg {

// /proc/cpuinfo's "model name" of the first processor ("unknown CPU" when there is none).
std::string cpu_model_name();

// The oneDNN ISA that oneDNN's CPU kernels use in this process: the best ISA this CPU supports,
// lowered by ONEDNN_MAX_CPU_ISA (or the older DNNL_MAX_CPU_ISA) when set. Named as oneDNN names its
// ISAs, lower case: sse41, avx, avx2, avx2_vnni, avx2_vnni_2, avx512_core, avx512_core_vnni,
// avx512_core_bf16, avx10_1_512, avx10_1_512_amx, avx10_1_512_amx_fp16. oneDNN in the torch wheel
// does not export its own query (dnnl_get_effective_cpu_isa), so this follows its rules
// (cpu_isa_traits.hpp) from the CPU's feature flags; a test checks it against ONEDNN_VERBOSE.
std::string onednn_cpu_isa();

// The best ATen CPU capability of this CPU as ATen chooses it without ATEN_CPU_CAPABILITY
// ("AVX512", "AVX2" or "DEFAULT").
std::string aten_native_cpu_capability();

// "AMD EPYC 7B13, 2 logical CPUs; oneDNN ISA avx2 [ONEDNN_MAX_CPU_ISA=AVX2]": what the figures
// of a torch-free program depend on (engine/device.h's machine_summary adds ATen's capability).
std::string cpu_summary();

}  // namespace detseg
