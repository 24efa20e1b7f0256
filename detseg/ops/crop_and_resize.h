// Implements: crop_and_resize with TensorFlow's semantics (tf.image.crop_and_resize, bilinear),
// used by the Object Detection API's Faster R-CNN for ROI pooling; differentiable w.r.t. image.
#pragma once

#include <ATen/ATen.h>

#include <utility>

namespace detseg {

struct CropAndResizeOptions {
  std::pair<int64_t, int64_t> crop_size{14, 14};  // (crop height, crop width), both >= 1
  double extrapolation_value = 0.0;  // value of samples that fall outside the image
};

// image: [B, C, H, W] (NCHW, unlike TF's NHWC); boxes: [K, 4] normalized (y1, x1, y2, x2) as in TF
// (convert absolute xyxy with xyxy_to_normalized_yxyx); box_indices: int [K] image of each box.
// Sample (i, j) of a crop reads image position y = y1 * (H - 1) + i * (y2 - y1) * (H - 1) /
// (crop_h - 1) (the box centre when crop_h == 1), likewise x; samples outside [0, H-1] x [0, W-1]
// get extrapolation_value. y2 < y1 flips the crop. Returns [K, C, crop_h, crop_w]. Gradients flow
// into `image` (not into boxes). A CUDA image runs the CUDA kernels (boxes and indices may be on
// either device); the result is on the image's device.
at::Tensor crop_and_resize(const at::Tensor& image, const at::Tensor& boxes,
                           const at::Tensor& box_indices, const CropAndResizeOptions& options);

// The raw kernels (no autograd). grad [K, C, ch, cw] -> grad_image of image_sizes (B, C, H, W).
at::Tensor crop_and_resize_forward(const at::Tensor& image, const at::Tensor& boxes,
                                   const at::Tensor& box_indices,
                                   const CropAndResizeOptions& options);
at::Tensor crop_and_resize_backward(const at::Tensor& grad, const at::Tensor& boxes,
                                    const at::Tensor& box_indices, at::IntArrayRef image_sizes,
                                    const CropAndResizeOptions& options);

}  // namespace detseg
