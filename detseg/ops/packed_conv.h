// Implements: inference convolutions in oneDNN's blocked layout with weights packed once. A conv's
// weights (with a following norm folded in, when there is one) are reordered into oneDNN's layout
// the first time and kept with the (data, version) of every tensor they were made from, so any
// change to the parameters (training, loading a checkpoint) repacks them.
// Why: at inference a run of convs in the blocked layout skips the reorders around each of them
// (ResNet-50 body ~25 % faster; docs/benchmarks.md). Model code never calls this directly: the conv
// layers (models/layers/conv_bn_act.h) send a blocked x here (see to_fast_layout, fast_paths.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace detseg {

struct PackedConvWeights {
  at::Tensor weight, bias;
  std::vector<std::pair<const void*, uint32_t>> made_from;
};

// The weight and bias to pack, made only when the cache is stale.
using MakeConvWeights = std::function<std::pair<at::Tensor, at::Tensor>()>;

// conv(x) for x in oneDNN's layout (in_fast_layout): `weight` is the conv's own weight (its shape
// decides the shortcut below), `sources` every tensor the packed weights depend on. A dilated 3x3
// stride-1 conv whose off-centre taps read only zero padding (the dilation reaches x's height and
// width: ASPP's rate 36 on a 32x32 map) runs as its centre tap, a 1x1 conv: same values, 1/9 of
// the work. The result stays in the blocked layout.
at::Tensor conv2d_packed(const at::Tensor& x, const at::Tensor& weight, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                         const std::vector<const at::Tensor*>& sources, const MakeConvWeights& make_weights,
                         PackedConvWeights& packed);

}  // namespace detseg
