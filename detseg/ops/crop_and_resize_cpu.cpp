// Implements: the crop_and_resize entry points (CUDA tensors go to crop_and_resize_cuda.cu) and the
// CPU kernels (TensorFlow's bilinear crop_and_resize on NCHW).
#include <ATen/Parallel.h>

#include <cmath>
#include <vector>

#include "detseg/core/error.h"
#include "detseg/ops/crop_and_resize.h"
#include "detseg/ops/cuda_kernels.h"

namespace detseg {

namespace {

// Where crop row/column i of `n` samples falls in an axis of `size` pixels for box edges (a, b),
// following TF's arithmetic (float); `inside` is false outside [0, size - 1].
struct Tap {
  int64_t lo = 0, hi = 0;
  float lerp = 0;
  bool inside = false;
};

std::vector<Tap> taps(float a, float b, int64_t n, int64_t size) {
  std::vector<Tap> t(static_cast<size_t>(n));
  const float scale = n > 1 ? (b - a) * (size - 1) / (n - 1) : 0.f;
  for (int64_t i = 0; i < n; ++i) {
    const float in = n > 1 ? a * (size - 1) + i * scale : 0.5f * (a + b) * (size - 1);
    Tap& tp = t[static_cast<size_t>(i)];
    if (in < 0 || in > size - 1) continue;
    tp.inside = true;
    tp.lo = static_cast<int64_t>(std::floor(in));
    tp.hi = static_cast<int64_t>(std::ceil(in));
    tp.lerp = in - tp.lo;
  }
  return t;
}

struct Checked {
  at::Tensor boxes, indices;  // float boxes, int64 indices, on the caller's devices

  Checked on_cpu() const {
    return {boxes.to(at::kCPU).contiguous(), indices.to(at::kCPU).contiguous()};
  }
};

Checked check_inputs(at::IntArrayRef image_sizes, const at::Tensor& boxes,
                     const at::Tensor& box_indices, const CropAndResizeOptions& o,
                     const char* what) {
  DETSEG_CHECK(boxes.defined() && boxes.dim() == 2 && boxes.size(1) == 4 &&
                   at::isFloatingType(boxes.scalar_type()),
               what, ": expected floating boxes [K, 4] (normalized y1, x1, y2, x2), got ",
               boxes.defined() ? boxes.sizes() : at::IntArrayRef{});
  DETSEG_CHECK(box_indices.defined() && box_indices.dim() == 1 &&
                   box_indices.size(0) == boxes.size(0) &&
                   !at::isFloatingType(box_indices.scalar_type()),
               what, ": expected integer box_indices [", boxes.size(0), "], got ",
               box_indices.defined() ? box_indices.sizes() : at::IntArrayRef{});
  DETSEG_CHECK(o.crop_size.first > 0 && o.crop_size.second > 0, what,
               ": crop size must be positive, got ", o.crop_size.first, "x", o.crop_size.second);
  Checked c{boxes.to(at::kFloat), box_indices.to(at::kLong)};
  if (boxes.size(0) > 0) {
    DETSEG_CHECK(!at::isnan(c.boxes).any().item<bool>(), what, ": boxes contain NaN");
    DETSEG_CHECK(c.indices.min().item<int64_t>() >= 0 &&
                     c.indices.max().item<int64_t>() < image_sizes[0],
                 what, ": box_indices must be in [0, ", image_sizes[0], ")");
  }
  return c;
}

}  // namespace

at::Tensor crop_and_resize_forward(const at::Tensor& image_in, const at::Tensor& boxes,
                                   const at::Tensor& box_indices, const CropAndResizeOptions& o) {
  DETSEG_CHECK(image_in.defined() && image_in.dim() == 4 && at::isFloatingType(image_in.scalar_type()),
               "crop_and_resize: expected a floating image [B, C, H, W], got ",
               image_in.defined() ? image_in.sizes() : at::IntArrayRef{});
  auto c = check_inputs(image_in.sizes(), boxes, box_indices, o, "crop_and_resize");
  if (image_in.is_cuda()) return cuda::crop_and_resize_forward(image_in, c.boxes, c.indices, o);
  c = c.on_cpu();
  auto image = image_in.to(at::kCPU).contiguous();
  const int64_t K = c.boxes.size(0), C = image.size(1), H = image.size(2), W = image.size(3);
  const int64_t CH = o.crop_size.first, CW = o.crop_size.second;
  auto out = at::empty({K, C, CH, CW}, image.options());
  AT_DISPATCH_FLOATING_TYPES(image.scalar_type(), "crop_and_resize_forward", [&] {
    const scalar_t* in = image.data_ptr<scalar_t>();
    const float* bx = c.boxes.data_ptr<float>();
    const int64_t* bi = c.indices.data_ptr<int64_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    const auto extrap = static_cast<scalar_t>(o.extrapolation_value);
    at::parallel_for(0, K, 1, [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        const float* b = bx + 4 * k;
        auto ty = taps(b[0], b[2], CH, H), tx = taps(b[1], b[3], CW, W);
        for (int64_t ch = 0; ch < C; ++ch) {
          const scalar_t* plane = in + (bi[k] * C + ch) * H * W;
          scalar_t* o_plane = dst + (k * C + ch) * CH * CW;
          for (int64_t y = 0; y < CH; ++y) {
            const Tap& py = ty[static_cast<size_t>(y)];
            for (int64_t x = 0; x < CW; ++x) {
              const Tap& px = tx[static_cast<size_t>(x)];
              if (!py.inside || !px.inside) {
                o_plane[y * CW + x] = extrap;
                continue;
              }
              const scalar_t tl = plane[py.lo * W + px.lo], tr = plane[py.lo * W + px.hi];
              const scalar_t bl = plane[py.hi * W + px.lo], br = plane[py.hi * W + px.hi];
              const scalar_t top = tl + (tr - tl) * px.lerp, bottom = bl + (br - bl) * px.lerp;
              o_plane[y * CW + x] = static_cast<scalar_t>(top + (bottom - top) * py.lerp);
            }
          }
        }
      }
    });
  });
  return out.to(image_in.device());
}

at::Tensor crop_and_resize_backward(const at::Tensor& grad_in, const at::Tensor& boxes,
                                    const at::Tensor& box_indices, at::IntArrayRef image_sizes,
                                    const CropAndResizeOptions& o) {
  DETSEG_CHECK(image_sizes.size() == 4, "crop_and_resize_backward: image sizes must be [B, C, H, W]");
  auto c = check_inputs(image_sizes, boxes, box_indices, o, "crop_and_resize_backward");
  const int64_t K = c.boxes.size(0), C = image_sizes[1], H = image_sizes[2], W = image_sizes[3];
  const int64_t CH = o.crop_size.first, CW = o.crop_size.second;
  DETSEG_CHECK(grad_in.dim() == 4 && grad_in.size(0) == K && grad_in.size(1) == C &&
                   grad_in.size(2) == CH && grad_in.size(3) == CW,
               "crop_and_resize_backward: expected grad [", K, ", ", C, ", ", CH, ", ", CW,
               "], got ", grad_in.sizes());
  if (grad_in.is_cuda())
    return cuda::crop_and_resize_backward(grad_in, c.boxes, c.indices, image_sizes, o);
  c = c.on_cpu();
  auto grad = grad_in.to(at::kCPU).contiguous();
  auto grad_image = at::zeros(image_sizes, grad.options());
  AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "crop_and_resize_backward", [&] {
    const scalar_t* g = grad.data_ptr<scalar_t>();
    const float* bx = c.boxes.data_ptr<float>();
    const int64_t* bi = c.indices.data_ptr<int64_t>();
    scalar_t* gi = grad_image.data_ptr<scalar_t>();
    // Threads own channel ranges, so no two write the same cell.
    at::parallel_for(0, C, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t k = 0; k < K; ++k) {
        const float* b = bx + 4 * k;
        auto ty = taps(b[0], b[2], CH, H), tx = taps(b[1], b[3], CW, W);
        for (int64_t ch = c0; ch < c1; ++ch) {
          scalar_t* plane = gi + (bi[k] * C + ch) * H * W;
          const scalar_t* src = g + (k * C + ch) * CH * CW;
          for (int64_t y = 0; y < CH; ++y) {
            const Tap& py = ty[static_cast<size_t>(y)];
            if (!py.inside) continue;
            for (int64_t x = 0; x < CW; ++x) {
              const Tap& px = tx[static_cast<size_t>(x)];
              if (!px.inside) continue;
              const scalar_t v = src[y * CW + x];
              const scalar_t dtop = (1 - py.lerp) * v, dbottom = py.lerp * v;
              plane[py.lo * W + px.lo] += dtop * (1 - px.lerp);
              plane[py.lo * W + px.hi] += dtop * px.lerp;
              plane[py.hi * W + px.lo] += dbottom * (1 - px.lerp);
              plane[py.hi * W + px.hi] += dbottom * px.lerp;
            }
          }
        }
      }
    });
  });
  return grad_image.to(grad_in.device());
}

}  // namespace detseg
