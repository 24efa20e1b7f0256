// Implements: the CUDA kernel entry points of a build without CUDA: each throws, so a CUDA tensor
// handed to an op fails with a clear message instead of a link error or a silent CPU round trip.
#include "detseg/ops/cuda_kernels.h"

#ifndef DETSEG_WITH_CUDA

#include "detseg/core/error.h"

namespace detseg {

namespace {
[[noreturn]] void no_cuda(const char* op) {
  throw Error(str(op, ": got a CUDA tensor, but detseg was built without CUDA kernels (configure "
                  "with a CUDA LibTorch and nvcc, -DDETSEG_WITH_CUDA=ON)"));
}
}  // namespace

bool cuda_kernels_built() { return false; }

namespace cuda {

at::Tensor nms(const at::Tensor&, const at::Tensor&, double) { no_cuda("nms"); }
at::Tensor batched_nms(const at::Tensor&, const at::Tensor&, const at::Tensor&, double) {
  no_cuda("batched_nms");
}
SoftNmsResult soft_nms(const at::Tensor&, const at::Tensor&, const SoftNmsOptions&) {
  no_cuda("soft_nms");
}
at::Tensor roi_align_forward(const at::Tensor&, const at::Tensor&, const RoiAlignOptions&) {
  no_cuda("roi_align");
}
at::Tensor roi_align_backward(const at::Tensor&, const at::Tensor&, at::IntArrayRef,
                              const RoiAlignOptions&) {
  no_cuda("roi_align_backward");
}
at::Tensor crop_and_resize_forward(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                   const CropAndResizeOptions&) {
  no_cuda("crop_and_resize");
}
at::Tensor crop_and_resize_backward(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                    at::IntArrayRef, const CropAndResizeOptions&) {
  no_cuda("crop_and_resize_backward");
}

}  // namespace cuda
}  // namespace detseg

#endif  // DETSEG_WITH_CUDA
