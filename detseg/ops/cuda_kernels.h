// Implements: the internal interface of the CUDA kernels (detseg/ops/*_cuda.cu). The public ops
// (nms.h, roi_align.h, crop_and_resize.h) validate their inputs and call these for CUDA tensors;
// a build without CUDA defines them to throw (cuda_kernels_stub.cpp).
#pragma once

#include <ATen/ATen.h>

#include "detseg/ops/crop_and_resize.h"
#include "detseg/ops/nms.h"
#include "detseg/ops/roi_align.h"

namespace detseg {

// True when this library holds the CUDA kernels (configured with DETSEG_WITH_CUDA).
bool cuda_kernels_built();

namespace cuda {

// Inputs are validated CUDA tensors on one device; results are on that device.
at::Tensor nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold);
at::Tensor batched_nms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& classes,
                       double iou_threshold);
SoftNmsResult soft_nms(const at::Tensor& boxes, const at::Tensor& scores,
                       const SoftNmsOptions& options);

at::Tensor roi_align_forward(const at::Tensor& input, const at::Tensor& rois,
                             const RoiAlignOptions& options);
at::Tensor roi_align_backward(const at::Tensor& grad_output, const at::Tensor& rois,
                              at::IntArrayRef input_sizes, const RoiAlignOptions& options);

// boxes: float [K, 4], box_indices: int64 [K], both on the image's device.
at::Tensor crop_and_resize_forward(const at::Tensor& image, const at::Tensor& boxes,
                                   const at::Tensor& box_indices,
                                   const CropAndResizeOptions& options);
at::Tensor crop_and_resize_backward(const at::Tensor& grad, const at::Tensor& boxes,
                                    const at::Tensor& box_indices, at::IntArrayRef image_sizes,
                                    const CropAndResizeOptions& options);

}  // namespace cuda
}  // namespace detseg
