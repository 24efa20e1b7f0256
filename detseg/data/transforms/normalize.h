// Implements: normalisation of uint8 RGB images to float: (pixel / 255 - mean) / std per channel.
#pragma once

#include <ATen/ATen.h>

#include <array>

namespace detseg {

struct NormalizeOptions {
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};  // ImageNet, on the [0, 1] scale
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
};

// [3, H, W] uint8 -> [3, H, W] float32.
at::Tensor normalize_image(const at::Tensor& image, const NormalizeOptions& options = {});

// Writes the normalised image into the top-left corner of `out` ([3, >=H, >=W] float32, any
// strides with contiguous rows), leaving the rest untouched. Used by collate to skip a copy.
void normalize_into(const at::Tensor& image, at::Tensor out, const NormalizeOptions& options = {});

}  // namespace detseg
