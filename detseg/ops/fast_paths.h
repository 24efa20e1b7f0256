// Implements: the one place detseg decides which CPU fast paths run, and the one switch set for
// them: runtime options read once from the environment (DETSEG_MKLDNN_INFERENCE=0 turns it off)
// and settable in-process (benchmarks run A/B pairs in one process; tests pin a path). Model code
// asks these predicates. (Winograd 3x3 convolution was one until its gain on LibTorch 2.11 fell
// under 10 %: docs/benchmarks.md.)
#pragma once

#include <ATen/core/Tensor.h>

namespace detseg {

struct FastPathOptions {
  bool mkldnn_inference = true;  // inference convs in oneDNN's blocked layout with packed weights
};

// The options in force: the environment's at first use, or the last set_fast_paths().
const FastPathOptions& fast_paths();
void set_fast_paths(const FastPathOptions& options);

// Whether inference on x (CPU, float, strided; not training, no autograd, not tracing) runs its
// convs in oneDNN's blocked layout.
bool mkldnn_inference_enabled(const at::Tensor& x, bool training);

}  // namespace detseg
