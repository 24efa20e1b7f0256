// Implements: glibc malloc settings that keep a training step's freed buffers for the next step.
// glibc serves a block above its mmap threshold (128 KiB at start, raised as such blocks are freed,
// to at most 32 MiB) with fresh pages from the kernel, and hands a freed heap top above its trim
// threshold back; every step then page-faults and zeroes the same activations again. Measured on
// a 2-core AMD EPYC (Zen 3) with 60 steps of tests/fixtures/learning/retinanet_overfit.yaml: 2.4-2.7
// million minor faults and 41.7-50.8 s with glibc's defaults, 0.20-0.26 million and 39.4-46.7 s
// with both thresholds fixed (docs/benchmarks.md, "Memory reuse").
#pragma once

#include <string>

namespace detseg {

// Fixes the mmap threshold at 32 MiB (glibc's ceiling) and the trim threshold at 1 GiB, unless the
// user tuned malloc (GLIBC_TUNABLES naming glibc.malloc, or MALLOC_MMAP_THRESHOLD_ /
// MALLOC_TRIM_THRESHOLD_). Acts once per process; every call returns what the first did, for
// `detseg info`.
const std::string& keep_freed_memory_for_reuse();

}  // namespace detseg
