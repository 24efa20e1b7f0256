// Implements: inference convolutions in oneDNN's blocked layout with packed weights (packed_conv.h).
#include "detseg/ops/packed_conv.h"

#include <ATen/ATen.h>

#include <array>

#include "detseg/ops/conv2d_fast.h"

namespace detseg {

at::Tensor conv2d_packed(const at::Tensor& x, const at::Tensor& weight, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                         const std::vector<const at::Tensor*>& sources, const MakeConvWeights& make_weights,
                         PackedConvWeights& packed) {
  TORCH_CHECK(x.is_mkldnn(), "conv2d_packed: x must be in oneDNN's layout (to_fast_layout)");
  const bool centre_tap = centre_tap_applies(x, weight, stride, padding, dilation);
  std::vector<std::pair<const void*, uint32_t>> made_from;
  made_from.reserve(sources.size() + 1);
  for (const at::Tensor* t : sources) made_from.emplace_back(t->data_ptr(), t->_version());
  made_from.emplace_back(nullptr, centre_tap ? 1u : 0u);  // which of the two packings is cached
  const std::array<int64_t, 2> no_padding = {0, 0}, unit = {1, 1};
  const at::IntArrayRef pad = centre_tap ? at::IntArrayRef(no_padding) : padding;
  const at::IntArrayRef dil = centre_tap ? at::IntArrayRef(unit) : dilation;
  if (!packed.weight.defined() || packed.made_from != made_from) {
    auto [w, b] = make_weights();
    if (centre_tap) w = w.slice(2, 1, 2).slice(3, 1, 2).contiguous();
    packed.weight = at::mkldnn_reorder_conv2d_weight(w.to_mkldnn(), pad, stride, dil, groups);
    packed.bias = b.contiguous();
    packed.made_from = std::move(made_from);
  }
  return at::mkldnn_convolution(x, packed.weight, packed.bias, pad, stride, dil, groups);
}

}  // namespace detseg
