// Implements: the one place detseg decides which CPU fast paths run, and the one switch set for
// them: runtime options read once from the environment (DETSEG_MKLDNN_INFERENCE=0 turns it off)
// and settable in-process (benchmarks run A/B pairs in one process; tests pin a path). Model code
// marks where a run of convolutions starts and ends (to_fast_layout / to_plain_layout); whether
// anything happens there, and which kernel the conv layers then take, is decided here and in
// packed_conv.h. (Winograd 3x3 convolution and huge-page tensors were fast paths until their gain
// on LibTorch 2.11 fell under 10 %: docs/benchmarks.md.)
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace detseg {

struct FastPathOptions {
  bool mkldnn_inference = true;  // inference convs in oneDNN's blocked layout with packed weights
  // A CPU model's 4-D conv weights kept channels-last (NHWC): oneDNN then runs every conv it feeds,
  // forward and backward, in NHWC, without reordering activations around each call. Depthwise
  // convs gain most (EfficientDet, MobileNetV2: docs/benchmarks.md).
  bool channels_last_weights = true;
  // GroupNorm of a channels-last CPU activation run on a plain (NCHW) copy: ATen 2.11's channels-last
  // GroupNorm kernels took 42 ms a step of the demo RetinaNet's GroupNorm head where the plain ones
  // take about 4 (train.profile; docs/benchmarks.md). DETSEG_GROUP_NORM_PLAIN=0 turns it off.
  bool group_norm_plain = true;
};

// The options in force: the environment's at first use, or the last set_fast_paths().
const FastPathOptions& fast_paths();
void set_fast_paths(const FastPathOptions& options);

// When fast_paths().channels_last_weights: each 4-D floating-point CPU tensor of `params` (a
// model's parameters, before an optimizer holds state for them) re-laid out channels-last in
// place: the same tensor and values, other strides. Returns how many it changed.
int64_t to_fast_weight_layout(const std::vector<at::Tensor>& params);

// Whether inference on x (CPU, float, strided; not training, no autograd, not tracing) runs its
// convs in oneDNN's blocked layout.
bool mkldnn_inference_enabled(const at::Tensor& x, bool training);

// Where a run of convolutions starts (a backbone body, an ASPP, a head subnet): x reordered once into
// oneDNN's blocked layout when mkldnn_inference_enabled(x, training), so the convs that follow skip
// the reorder around each of them; else x itself (also when x is blocked already).
at::Tensor to_fast_layout(const at::Tensor& x, bool training);
// Where it ends, or before an op without a blocked kernel (cat, upsampling, GroupNorm): x in the
// plain strided layout; a plain x is returned as is.
at::Tensor to_plain_layout(const at::Tensor& x);
// GroupNorm's input: x in the plain layout when fast_paths().group_norm_plain and x is a
// channels-last CPU tensor, else x.
at::Tensor group_norm_input(const at::Tensor& x);
// Whether x is in the blocked layout (the conv layers then use packed_conv.h).
bool in_fast_layout(const at::Tensor& x);
// The mean over H and W of x [N, C, H, W] in either layout, as a plain [N, C, 1, 1].
at::Tensor global_average_pool(const at::Tensor& x);

}  // namespace detseg
