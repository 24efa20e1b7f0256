// Implements: tracing(), whether LibTorch's tracer is recording the ops run on this thread (what
// `detseg export` does to build a TorchScript graph). The CPU fast paths of ops/ and models/ step
// aside while it records, so that the graph holds plain aten convolutions every runtime runs
// (TorchScript on any device, ONNX): oneDNN's blocked layouts and packed-weight caches would be
// frozen into it as constants, and our own kernels (the 2x2 transposed conv) are invisible to the
// tracer.
#pragma once

#include <ATen/TracerMode.h>

namespace detseg {

inline bool tracing() { return at::tracer::impl::is_dispatch_enabled(); }

}  // namespace detseg
