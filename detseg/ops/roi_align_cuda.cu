// Implements: the CUDA RoIAlign kernels, one thread per output cell; the backward pass scatters
// with atomicAdd. The arithmetic follows roi_align_cpu.cpp (torchvision's) step for step, so float
// and double results agree with the CPU kernels; Half/BFloat16 accumulate in float.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "detseg/ops/cuda_kernels.h"

namespace detseg {
namespace cuda {

namespace {

constexpr int kThreads = 256;

struct RoiAlignParams {
  int64_t channels, height, width, pooled_h, pooled_w, sampling_ratio;
  double spatial_scale;
  bool aligned;
};

// One region's sampling grid.
template <typename T>
struct RoiGrid {
  int64_t batch, grid_h, grid_w;
  T start_h, start_w, bin_h, bin_w, count;
};

template <typename T>
__device__ RoiGrid<T> roi_grid(const T* roi, const RoiAlignParams& p) {
  const T scale = static_cast<T>(p.spatial_scale);
  const T offset = p.aligned ? T(0.5) : T(0.0);
  RoiGrid<T> g;
  g.batch = static_cast<int64_t>(roi[0]);
  g.start_w = roi[1] * scale - offset;
  g.start_h = roi[2] * scale - offset;
  T roi_w = (roi[3] * scale - offset) - g.start_w, roi_h = (roi[4] * scale - offset) - g.start_h;
  if (!p.aligned) {  // legacy mode forces malformed regions to 1x1
    roi_w = roi_w < T(1) ? T(1) : roi_w;
    roi_h = roi_h < T(1) ? T(1) : roi_h;
  }
  g.bin_h = roi_h / static_cast<T>(p.pooled_h);
  g.bin_w = roi_w / static_cast<T>(p.pooled_w);
  g.grid_h = p.sampling_ratio > 0 ? p.sampling_ratio
                                  : static_cast<int64_t>(ceil(roi_h / static_cast<T>(p.pooled_h)));
  g.grid_w = p.sampling_ratio > 0 ? p.sampling_ratio
                                  : static_cast<int64_t>(ceil(roi_w / static_cast<T>(p.pooled_w)));
  const int64_t count = g.grid_h * g.grid_w;
  g.count = static_cast<T>(count > 1 ? count : 1);
  return g;
}

// The four taps of one bilinear sample in an H x W plane; all weights 0 outside the map.
template <typename T>
struct Taps {
  int64_t o1, o2, o3, o4;
  T w1, w2, w3, w4;
  bool inside;
};

template <typename T>
__device__ Taps<T> sample_taps(const RoiGrid<T>& g, int64_t ph, int64_t pw, int64_t iy, int64_t ix,
                               int64_t height, int64_t width) {
  T y = g.start_h + static_cast<T>(ph) * g.bin_h +
        static_cast<T>(static_cast<float>(iy) + .5f) * g.bin_h / static_cast<T>(g.grid_h);
  T x = g.start_w + static_cast<T>(pw) * g.bin_w +
        static_cast<T>(static_cast<float>(ix) + .5f) * g.bin_w / static_cast<T>(g.grid_w);
  Taps<T> t{0, 0, 0, 0, T(0), T(0), T(0), T(0), false};
  if (y < -1.0 || y > static_cast<T>(height) || x < -1.0 || x > static_cast<T>(width)) return t;
  if (y <= 0) y = 0;
  if (x <= 0) x = 0;
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x), y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<T>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<T>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const T ly = y - static_cast<T>(y_low), lx = x - static_cast<T>(x_low);
  const T hy = T(1) - ly, hx = T(1) - lx;
  t = Taps<T>{y_low * width + x_low, y_low * width + x_high, y_high * width + x_low,
              y_high * width + x_high, hy * hx, hy * lx, ly * hx, ly * lx, true};
  return t;
}

// Output cell `index` of [K, C, PH, PW] as (region, channel, ph, pw).
struct Cell {
  int64_t k, c, ph, pw;
};
__device__ Cell cell_of(int64_t index, const RoiAlignParams& p) {
  Cell cell;
  cell.pw = index % p.pooled_w;
  cell.ph = (index / p.pooled_w) % p.pooled_h;
  cell.c = (index / (p.pooled_w * p.pooled_h)) % p.channels;
  cell.k = index / (p.pooled_w * p.pooled_h * p.channels);
  return cell;
}

// scalar_t: the tensors' type; acc_t: the arithmetic's (float for Half/BFloat16).
template <typename scalar_t, typename acc_t>
__global__ void roi_align_forward_kernel(int64_t total, RoiAlignParams p,
                                         const scalar_t* __restrict__ input,
                                         const acc_t* __restrict__ rois,
                                         scalar_t* __restrict__ output) {
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < total;
       index += int64_t(blockDim.x) * gridDim.x) {
    const Cell cell = cell_of(index, p);
    const RoiGrid<acc_t> g = roi_grid(rois + 5 * cell.k, p);
    const scalar_t* plane = input + (g.batch * p.channels + cell.c) * p.height * p.width;
    acc_t sum = 0;
    for (int64_t iy = 0; iy < g.grid_h; ++iy)
      for (int64_t ix = 0; ix < g.grid_w; ++ix) {
        const Taps<acc_t> t = sample_taps(g, cell.ph, cell.pw, iy, ix, p.height, p.width);
        if (!t.inside) continue;
        sum += t.w1 * static_cast<acc_t>(plane[t.o1]) + t.w2 * static_cast<acc_t>(plane[t.o2]) +
               t.w3 * static_cast<acc_t>(plane[t.o3]) + t.w4 * static_cast<acc_t>(plane[t.o4]);
      }
    output[index] = static_cast<scalar_t>(sum / g.count);
  }
}

// grad_input is in acc_t (float for Half/BFloat16): atomics on it, and no rounding per addition.
template <typename scalar_t, typename acc_t>
__global__ void roi_align_backward_kernel(int64_t total, RoiAlignParams p,
                                          const scalar_t* __restrict__ grad_output,
                                          const acc_t* __restrict__ rois,
                                          acc_t* __restrict__ grad_input) {
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < total;
       index += int64_t(blockDim.x) * gridDim.x) {
    const Cell cell = cell_of(index, p);
    const RoiGrid<acc_t> g = roi_grid(rois + 5 * cell.k, p);
    acc_t* plane = grad_input + (g.batch * p.channels + cell.c) * p.height * p.width;
    const acc_t grad = static_cast<acc_t>(grad_output[index]) / g.count;
    for (int64_t iy = 0; iy < g.grid_h; ++iy)
      for (int64_t ix = 0; ix < g.grid_w; ++ix) {
        const Taps<acc_t> t = sample_taps(g, cell.ph, cell.pw, iy, ix, p.height, p.width);
        if (!t.inside) continue;
        atomicAdd(plane + t.o1, t.w1 * grad);
        atomicAdd(plane + t.o2, t.w2 * grad);
        atomicAdd(plane + t.o3, t.w3 * grad);
        atomicAdd(plane + t.o4, t.w4 * grad);
      }
  }
}

RoiAlignParams params_of(int64_t C, int64_t H, int64_t W, const RoiAlignOptions& o) {
  return RoiAlignParams{C, H, W, o.output_size.first, o.output_size.second, o.sampling_ratio,
                        o.spatial_scale, o.aligned};
}

int blocks_for(int64_t total) {
  return static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, int64_t(1) << 20));
}

}  // namespace

at::Tensor roi_align_forward(const at::Tensor& input_in, const at::Tensor& rois_in,
                             const RoiAlignOptions& o) {
  c10::cuda::CUDAGuard guard(input_in.device());
  auto input = input_in.contiguous();
  const int64_t K = rois_in.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  auto output = at::empty({K, C, o.output_size.first, o.output_size.second}, input.options());
  const int64_t total = output.numel();
  if (total == 0) return output;
  const RoiAlignParams p = params_of(C, H, W, o);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "roi_align_cuda", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    auto rois = rois_in.to(input.device(), c10::CppTypeToScalarType<acc_t>::value).contiguous();
    roi_align_forward_kernel<scalar_t, acc_t>
        <<<blocks_for(total), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            total, p, input.data_ptr<scalar_t>(), rois.data_ptr<acc_t>(),
            output.data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return output;
}

at::Tensor roi_align_backward(const at::Tensor& grad_in, const at::Tensor& rois_in,
                              at::IntArrayRef input_sizes, const RoiAlignOptions& o) {
  c10::cuda::CUDAGuard guard(grad_in.device());
  auto grad = grad_in.contiguous();
  const int64_t total = grad.numel();
  const RoiAlignParams p = params_of(input_sizes[1], input_sizes[2], input_sizes[3], o);
  at::Tensor grad_input;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad.scalar_type(), "roi_align_backward_cuda", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const auto acc_type = c10::CppTypeToScalarType<acc_t>::value;
    auto rois = rois_in.to(grad.device(), acc_type).contiguous();
    grad_input = at::zeros(input_sizes, grad.options().dtype(acc_type));
    if (total == 0) return;
    roi_align_backward_kernel<scalar_t, acc_t>
        <<<blocks_for(total), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            total, p, grad.data_ptr<scalar_t>(), rois.data_ptr<acc_t>(),
            grad_input.data_ptr<acc_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return grad_input.to(grad.scalar_type());
}

}  // namespace cuda
}  // namespace detseg
