// Implements: RoIAlign (Mask R-CNN), same contract and numbers as torchvision.ops.roi_align,
// differentiable with respect to the feature map.
#pragma once

#include <ATen/ATen.h>

#include <utility>
#include <vector>

namespace detseg {

struct RoiAlignOptions {
  std::pair<int64_t, int64_t> output_size{7, 7};  // (pooled height, pooled width)
  double spatial_scale = 1.0;  // feature stride^-1: box coordinate * scale = feature coordinate
  int64_t sampling_ratio = -1;  // samples per bin side; <= 0: ceil(roi size / output size)
  bool aligned = false;         // true: shift by -0.5 px (pixel centres); the detectron2 default
};

// input: [B, C, H, W] float/double; rois: [K, 5] rows (batch index, x1, y1, x2, y2) in input image
// coordinates. Returns [K, C, out_h, out_w]. Gradients flow into `input` (not into rois).
// CPU kernels run parallel over regions (forward) and channels (backward); CUDA tensors run the
// CUDA kernels (float, double, Half, BFloat16), results on the input's device.
at::Tensor roi_align(const at::Tensor& input, const at::Tensor& rois, const RoiAlignOptions& options);
// The same with one xyxy box tensor [K_b, 4] per image, like torchvision's list form.
at::Tensor roi_align(const at::Tensor& input, const std::vector<at::Tensor>& boxes_per_image,
                     const RoiAlignOptions& options);
// [sum K_b, 5] rois from per-image xyxy boxes.
at::Tensor boxes_to_rois(const std::vector<at::Tensor>& boxes_per_image);

// The raw kernels behind roi_align (no autograd).
at::Tensor roi_align_forward(const at::Tensor& input, const at::Tensor& rois,
                             const RoiAlignOptions& options);
// grad_output [K, C, out_h, out_w] -> grad_input [B, C, H, W] for input_sizes (B, C, H, W).
at::Tensor roi_align_backward(const at::Tensor& grad_output, const at::Tensor& rois,
                              at::IntArrayRef input_sizes, const RoiAlignOptions& options);

}  // namespace detseg
