// Implements: refusing, in our words, work that cannot fit in memory, before it starts: a model's
// weights estimated before it is built (model.num_classes 100000 makes RetinaNet's class head alone
// 8 GB), and a CPU allocator guard that refuses a block larger than the memory left, naming its
// size, where the kernel would otherwise let the process grow until its OOM killer ends it silently.
#pragma once

#include <cstdint>
#include <exception>
#include <string>

#include "detseg/config/config.h"

namespace detseg {

// Bytes this process may still allocate: /proc/meminfo's MemAvailable plus SwapFree, or what the
// cgroup (v2 memory.max) leaves, whichever is less; -1 where neither can be read.
int64_t available_memory_bytes();

// "37.2 GB" (decimal units, as `free -h` and the allocator's numbers are compared by users).
std::string gigabytes(double bytes);

enum class ModelUse { kInference, kTraining };

// Throws ConfigError "model.num_classes N: <model> ... needs X GB ..., more than the Y GB of memory
// available" when the model's weights (inference) or weights, gradients, optimizer state and EMA
// copy (training) cannot fit. The weights are counted without building the model at its size: two
// small builds (1 and 2 classes) give the per-class growth, which is linear in every model. Only
// models with 1000 classes or more are estimated (others are small by construction); a config
// whose small builds fail is left to the allocator guard.
void check_model_fits_in_memory(const PipelineConfig& config, ModelUse use);

// When `e` is an allocation failure (std::bad_alloc, c10::OutOfMemoryError, LibTorch's "can't
// allocate memory"), throws Error "<doing>: out of memory: a block of X GB was asked for, ..."; else
// returns, and the caller rethrows `e`.
void rethrow_if_out_of_memory(const std::exception& e, const std::string& doing);

// Installs (once per process) a CPU allocator that refuses a block of 64 MiB or more when it is
// larger than available_memory_bytes(), throwing c10::OutOfMemoryError "out of memory: a block of
// X GB was asked for, Y GB is available". Blocks LibTorch asks for through other allocators (oneDNN's
// scratch, CUDA) are not seen.
void guard_cpu_allocations();

}  // namespace detseg
