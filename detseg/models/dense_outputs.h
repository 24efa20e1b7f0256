// Implements: the raw output of a one-stage detector network, before anchors and decoding.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <vector>

namespace detseg {

// Anchors are ordered (level, y, x, anchor) like torchvision: level l contributes
// level_sizes[l][0] * level_sizes[l][1] * A consecutive rows.
struct DenseOutputs {
  at::Tensor cls_logits;      // [N, sum(H_l W_l A), K]
  at::Tensor box_regression;  // [N, sum(H_l W_l A), 4]
  std::vector<std::array<int64_t, 2>> level_sizes;  // (H_l, W_l) per level, finest first
  std::vector<int64_t> strides;                      // nominal stride 2^level per level
};

// Fills level sizes from the pyramid maps ([N, C, H_l, W_l], finest first) and the nominal
// strides 2^level from min_level up. (torchvision's AnchorGenerator uses image_size // grid_size,
// the same numbers when the input is padded to a multiple of the coarsest stride, as it pads.)
inline void set_level_geometry(DenseOutputs& out, const std::vector<at::Tensor>& pyramid,
                               int64_t min_level) {
  out.level_sizes.clear();
  out.strides.clear();
  for (size_t l = 0; l < pyramid.size(); ++l) {
    out.level_sizes.push_back({pyramid[l].size(2), pyramid[l].size(3)});
    out.strides.push_back(int64_t{1} << (min_level + static_cast<int64_t>(l)));
  }
}

}  // namespace detseg
