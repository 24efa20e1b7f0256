// Implements: the CUDA crop_and_resize kernels (TensorFlow's bilinear crop_and_resize on NCHW), one
// thread per crop cell; the backward pass scatters with atomicAdd. The float tap arithmetic and the
// interpolation order follow crop_and_resize_cpu.cpp; Half/BFloat16 compute in float.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "detseg/ops/cuda_kernels.h"

namespace detseg {
namespace cuda {

namespace {

constexpr int kThreads = 256;

struct CropParams {
  int64_t channels, height, width, crop_h, crop_w;
};

// Where crop row/column i of n samples falls on an axis of `size` pixels for box edges (a, b);
// `inside` is false outside [0, size - 1]. TF's float arithmetic, as taps() on the CPU.
struct Tap {
  int64_t lo, hi;
  float lerp;
  bool inside;
};

__device__ Tap tap_at(float a, float b, int64_t i, int64_t n, int64_t size) {
  const float last = static_cast<float>(size - 1);
  const float scale = n > 1 ? (b - a) * last / static_cast<float>(n - 1) : 0.f;
  const float in = n > 1 ? a * last + static_cast<float>(i) * scale : 0.5f * (a + b) * last;
  if (in < 0 || in > last) return Tap{0, 0, 0.f, false};
  const int64_t lo = static_cast<int64_t>(floorf(in));
  return Tap{lo, static_cast<int64_t>(ceilf(in)), in - static_cast<float>(lo), true};
}

// Crop cell `index` of [K, C, CH, CW]: its taps and the image plane it reads.
struct CropCell {
  Tap y, x;
  int64_t plane;  // offset of the (image, channel) plane
};

__device__ CropCell crop_cell(int64_t index, const CropParams& p, const float* boxes,
                              const int64_t* box_indices) {
  const int64_t x = index % p.crop_w, y = (index / p.crop_w) % p.crop_h;
  const int64_t c = (index / (p.crop_w * p.crop_h)) % p.channels;
  const int64_t k = index / (p.crop_w * p.crop_h * p.channels);
  const float* b = boxes + 4 * k;
  return CropCell{tap_at(b[0], b[2], y, p.crop_h, p.height), tap_at(b[1], b[3], x, p.crop_w, p.width),
                  (box_indices[k] * p.channels + c) * p.height * p.width};
}

template <typename scalar_t, typename acc_t>
__global__ void crop_and_resize_forward_kernel(int64_t total, CropParams p, acc_t extrapolation,
                                               const scalar_t* __restrict__ image,
                                               const float* __restrict__ boxes,
                                               const int64_t* __restrict__ box_indices,
                                               scalar_t* __restrict__ crops) {
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < total;
       index += int64_t(blockDim.x) * gridDim.x) {
    const CropCell cell = crop_cell(index, p, boxes, box_indices);
    if (!cell.y.inside || !cell.x.inside) {
      crops[index] = static_cast<scalar_t>(extrapolation);
      continue;
    }
    const scalar_t* plane = image + cell.plane;
    const acc_t tl = plane[cell.y.lo * p.width + cell.x.lo], tr = plane[cell.y.lo * p.width + cell.x.hi];
    const acc_t bl = plane[cell.y.hi * p.width + cell.x.lo], br = plane[cell.y.hi * p.width + cell.x.hi];
    const acc_t top = tl + (tr - tl) * static_cast<acc_t>(cell.x.lerp);
    const acc_t bottom = bl + (br - bl) * static_cast<acc_t>(cell.x.lerp);
    crops[index] = static_cast<scalar_t>(top + (bottom - top) * static_cast<acc_t>(cell.y.lerp));
  }
}

// grad_image is in acc_t (float for Half/BFloat16).
template <typename scalar_t, typename acc_t>
__global__ void crop_and_resize_backward_kernel(int64_t total, CropParams p,
                                                const scalar_t* __restrict__ grad,
                                                const float* __restrict__ boxes,
                                                const int64_t* __restrict__ box_indices,
                                                acc_t* __restrict__ grad_image) {
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < total;
       index += int64_t(blockDim.x) * gridDim.x) {
    const CropCell cell = crop_cell(index, p, boxes, box_indices);
    if (!cell.y.inside || !cell.x.inside) continue;
    acc_t* plane = grad_image + cell.plane;
    const acc_t v = static_cast<acc_t>(grad[index]);
    const acc_t dtop = static_cast<acc_t>(1 - cell.y.lerp) * v;
    const acc_t dbottom = static_cast<acc_t>(cell.y.lerp) * v;
    const acc_t wl = static_cast<acc_t>(1 - cell.x.lerp), wh = static_cast<acc_t>(cell.x.lerp);
    atomicAdd(plane + cell.y.lo * p.width + cell.x.lo, dtop * wl);
    atomicAdd(plane + cell.y.lo * p.width + cell.x.hi, dtop * wh);
    atomicAdd(plane + cell.y.hi * p.width + cell.x.lo, dbottom * wl);
    atomicAdd(plane + cell.y.hi * p.width + cell.x.hi, dbottom * wh);
  }
}

int blocks_for(int64_t total) {
  return static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, int64_t(1) << 20));
}

}  // namespace

at::Tensor crop_and_resize_forward(const at::Tensor& image_in, const at::Tensor& boxes_in,
                                   const at::Tensor& box_indices_in, const CropAndResizeOptions& o) {
  c10::cuda::CUDAGuard guard(image_in.device());
  auto image = image_in.contiguous();
  auto boxes = boxes_in.to(image.device(), at::kFloat).contiguous();
  auto box_indices = box_indices_in.to(image.device(), at::kLong).contiguous();
  const CropParams p{image.size(1), image.size(2), image.size(3), o.crop_size.first,
                     o.crop_size.second};
  auto crops = at::empty({boxes.size(0), p.channels, p.crop_h, p.crop_w}, image.options());
  const int64_t total = crops.numel();
  if (total == 0) return crops;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, image.scalar_type(), "crop_and_resize_cuda", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    crop_and_resize_forward_kernel<scalar_t, acc_t>
        <<<blocks_for(total), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            total, p, static_cast<acc_t>(o.extrapolation_value), image.data_ptr<scalar_t>(),
            boxes.data_ptr<float>(), box_indices.data_ptr<int64_t>(), crops.data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return crops;
}

at::Tensor crop_and_resize_backward(const at::Tensor& grad_in, const at::Tensor& boxes_in,
                                    const at::Tensor& box_indices_in, at::IntArrayRef image_sizes,
                                    const CropAndResizeOptions& o) {
  c10::cuda::CUDAGuard guard(grad_in.device());
  auto grad = grad_in.contiguous();
  auto boxes = boxes_in.to(grad.device(), at::kFloat).contiguous();
  auto box_indices = box_indices_in.to(grad.device(), at::kLong).contiguous();
  const CropParams p{image_sizes[1], image_sizes[2], image_sizes[3], o.crop_size.first,
                     o.crop_size.second};
  const int64_t total = grad.numel();
  at::Tensor grad_image;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad.scalar_type(), "crop_and_resize_backward_cuda", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    grad_image = at::zeros(image_sizes, grad.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
    if (total == 0) return;
    crop_and_resize_backward_kernel<scalar_t, acc_t>
        <<<blocks_for(total), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            total, p, grad.data_ptr<scalar_t>(), boxes.data_ptr<float>(),
            box_indices.data_ptr<int64_t>(), grad_image.data_ptr<acc_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return grad_image.to(grad.scalar_type());
}

}  // namespace cuda
}  // namespace detseg
