// Implements: the one place detseg decides which CPU fast paths run, and the one switch set for
// them: runtime options read once from the environment (DETSEG_WINOGRAD=0,
// DETSEG_MKLDNN_INFERENCE=0 turn one off) and settable in-process (benchmarks run A/B pairs in one
// process; tests pin a path). Model code asks these predicates; the kernels live beside them in ops/.
#pragma once

#include <ATen/core/Tensor.h>

namespace detseg {

struct FastPathOptions {
  bool winograd = true;          // Winograd F(2x2, 3x3) for the RetinaNet subnets' 3x3 convs (ops/winograd_conv.h)
  bool mkldnn_inference = true;  // inference convs in oneDNN's blocked layout with packed weights
};

// The options in force: the environment's at first use, or the last set_fast_paths().
const FastPathOptions& fast_paths();
void set_fast_paths(const FastPathOptions& options);

// Whether inference on x (CPU, float, strided; not training, no autograd, not tracing) runs its
// convs in oneDNN's blocked layout.
bool mkldnn_inference_enabled(const at::Tensor& x, bool training);

}  // namespace detseg
