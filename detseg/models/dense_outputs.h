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
  std::vector<int64_t> strides;                      // input pixels per cell per level
};

// Fills level sizes and strides from the pyramid maps ([N, C, H_l, W_l]) and the input images.
inline void set_level_geometry(DenseOutputs& out, const std::vector<at::Tensor>& pyramid,
                               const at::Tensor& images) {
  out.level_sizes.clear();
  out.strides.clear();
  for (const at::Tensor& p : pyramid) {
    out.level_sizes.push_back({p.size(2), p.size(3)});
    // As torchvision's AnchorGenerator: input size // feature size.
    out.strides.push_back(images.size(2) / p.size(2));
  }
}

}  // namespace detseg
