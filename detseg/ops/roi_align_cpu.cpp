// Implements: the RoIAlign entry points (CUDA tensors go to roi_align_cuda.cu) and the CPU kernels
// (forward parallel over regions, backward parallel over channels so threads never write the same
// gradient cell), on channels-last copies.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "detseg/core/error.h"
#include "detseg/ops/cuda_kernels.h"
#include "detseg/ops/roi_align.h"

namespace detseg {

namespace {

// One bilinear sample: four flat offsets into an H*W plane and their weights (0 outside).
template <typename T>
struct Sample {
  int64_t o1, o2, o3, o4;
  T w1, w2, w3, w4;
};

struct RoiGeometry {
  int64_t batch = 0, grid_h = 0, grid_w = 0;
  double count = 1;
};

// Samples of every (ph, pw, iy, ix) of one region, in that order; the arithmetic follows
// torchvision's kernel so results agree to the last bit in float.
template <typename T>
RoiGeometry region_samples(const T* roi, int64_t height, int64_t width, const RoiAlignOptions& o,
                           std::vector<Sample<T>>& out) {
  const int64_t ph_n = o.output_size.first, pw_n = o.output_size.second;
  const T scale = static_cast<T>(o.spatial_scale);
  const T offset = o.aligned ? T(0.5) : T(0.0);
  const T start_w = roi[1] * scale - offset, start_h = roi[2] * scale - offset;
  const T end_w = roi[3] * scale - offset, end_h = roi[4] * scale - offset;
  T roi_w = end_w - start_w, roi_h = end_h - start_h;
  if (!o.aligned) {  // legacy mode forces malformed regions to 1x1
    roi_w = std::max(roi_w, T(1));
    roi_h = std::max(roi_h, T(1));
  }
  const T bin_h = roi_h / static_cast<T>(ph_n), bin_w = roi_w / static_cast<T>(pw_n);
  RoiGeometry g;
  g.batch = static_cast<int64_t>(roi[0]);
  // An inverted region in aligned mode gives a negative adaptive grid: no samples (output 0, as in
  // torchvision), never a negative sample count.
  g.grid_h = o.sampling_ratio > 0 ? o.sampling_ratio
                                  : std::max<int64_t>(0, static_cast<int64_t>(std::ceil(roi_h / ph_n)));
  g.grid_w = o.sampling_ratio > 0 ? o.sampling_ratio
                                  : std::max<int64_t>(0, static_cast<int64_t>(std::ceil(roi_w / pw_n)));
  g.count = std::max<int64_t>(g.grid_h * g.grid_w, 1);
  out.resize(static_cast<size_t>(ph_n * pw_n * g.grid_h * g.grid_w));
  size_t k = 0;
  for (int64_t ph = 0; ph < ph_n; ++ph)
    for (int64_t pw = 0; pw < pw_n; ++pw)
      for (int64_t iy = 0; iy < g.grid_h; ++iy) {
        const T y0 = start_h + ph * bin_h +
                     static_cast<T>(iy + .5f) * bin_h / static_cast<T>(g.grid_h);
        for (int64_t ix = 0; ix < g.grid_w; ++ix) {
          T y = y0;
          T x = start_w + pw * bin_w + static_cast<T>(ix + .5f) * bin_w / static_cast<T>(g.grid_w);
          Sample<T>& s = out[k++];
          if (y < -1.0 || y > height || x < -1.0 || x > width) {
            s = Sample<T>{0, 0, 0, 0, 0, 0, 0, 0};
            continue;
          }
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
          const T ly = y - y_low, lx = x - x_low, hy = T(1) - ly, hx = T(1) - lx;
          s = Sample<T>{y_low * width + x_low, y_low * width + x_high, y_high * width + x_low,
                        y_high * width + x_high, hy * hx, hy * lx, ly * hx, ly * lx};
        }
      }
  return g;
}

void check_roi_inputs(const at::Tensor& rois, int64_t batch, const RoiAlignOptions& o,
                      const char* what) {
  DETSEG_CHECK(rois.defined() && rois.dim() == 2 && rois.size(1) == 5, what,
               ": expected rois [K, 5] (batch index, x1, y1, x2, y2), got ",
               rois.defined() ? rois.sizes() : at::IntArrayRef{});
  DETSEG_CHECK(at::isFloatingType(rois.scalar_type()), what, ": expected floating rois, got ",
               rois.scalar_type());
  DETSEG_CHECK(o.output_size.first > 0 && o.output_size.second > 0, what,
               ": output size must be positive, got ", o.output_size.first, "x",
               o.output_size.second);
  DETSEG_CHECK(o.spatial_scale > 0, what, ": spatial_scale must be > 0, got ", o.spatial_scale);
  if (rois.size(0) == 0) return;
  DETSEG_CHECK(!at::isnan(rois).any().item<bool>(), what, ": rois contain NaN");
  auto idx = rois.select(1, 0);
  DETSEG_CHECK(idx.min().item<double>() >= 0 && idx.max().item<double>() < batch, what,
               ": roi batch indices must be in [0, ", batch, "), got [", idx.min().item<double>(),
               ", ", idx.max().item<double>(), "]");
}

}  // namespace

// Both kernels read channels-last copies ([B, H, W, C] features), so the innermost loop runs over
// contiguous channels and vectorizes; the per-channel arithmetic is unchanged (same terms, same
// order as torchvision's kernel). The forward pass sums one region at a time into a [PH * PW, C]
// buffer that stays in cache and writes it transposed into the [K, C, PH, PW] output, instead of
// permuting a whole channels-last output afterwards (a 50 MB copy for 1000 proposals).
at::Tensor roi_align_forward(const at::Tensor& input_in, const at::Tensor& rois_in,
                             const RoiAlignOptions& o) {
  DETSEG_CHECK(input_in.defined() && input_in.dim() == 4 &&
                   at::isFloatingType(input_in.scalar_type()),
               "roi_align: expected a floating input [B, C, H, W], got ",
               input_in.defined() ? input_in.sizes() : at::IntArrayRef{});
  check_roi_inputs(rois_in, input_in.size(0), o, "roi_align");
  const auto device = input_in.device();
  const int64_t K = rois_in.size(0), C = input_in.size(1), H = input_in.size(2),
                W = input_in.size(3);
  const int64_t PH = o.output_size.first, PW = o.output_size.second;
  if (K == 0 || C == 0) return at::zeros({K, C, PH, PW}, input_in.options());
  if (input_in.is_cuda()) return cuda::roi_align_forward(input_in, rois_in, o);
  auto input = input_in.to(at::kCPU).permute({0, 2, 3, 1}).contiguous();  // [B, H, W, C]
  auto rois = rois_in.to(at::kCPU, input.scalar_type()).contiguous();
  auto output = at::empty({K, C, PH, PW}, input.options());
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "roi_align_forward", [&] {
    const scalar_t* in = input.data_ptr<scalar_t>();
    const scalar_t* r = rois.data_ptr<scalar_t>();
    scalar_t* out = output.data_ptr<scalar_t>();
    const int64_t bins = PH * PW;
    at::parallel_for(0, K, 1, [&](int64_t k0, int64_t k1) {
      std::vector<Sample<scalar_t>> samples;
      std::vector<scalar_t> region(static_cast<size_t>(bins * C));  // [PH * PW, C]
      for (int64_t k = k0; k < k1; ++k) {
        auto g = region_samples(r + 5 * k, H, W, o, samples);
        const int64_t per_bin = g.grid_h * g.grid_w;
        const scalar_t count = static_cast<scalar_t>(g.count);
        const scalar_t* image = in + g.batch * H * W * C;
        const Sample<scalar_t>* s = samples.data();
        for (int64_t bin = 0; bin < bins; ++bin) {
          scalar_t* dst = region.data() + bin * C;
          std::fill(dst, dst + C, scalar_t(0));
          for (int64_t i = 0; i < per_bin; ++i, ++s) {
            const scalar_t *p1 = image + s->o1 * C, *p2 = image + s->o2 * C;
            const scalar_t *p3 = image + s->o3 * C, *p4 = image + s->o4 * C;
            const scalar_t w1 = s->w1, w2 = s->w2, w3 = s->w3, w4 = s->w4;
            for (int64_t c = 0; c < C; ++c)
              dst[c] += w1 * p1[c] + w2 * p2[c] + w3 * p3[c] + w4 * p4[c];
          }
        }
        scalar_t* dst = out + k * C * bins;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t bin = 0; bin < bins; ++bin) dst[c * bins + bin] = region[bin * C + c] / count;
      }
    });
  });
  return output.to(device);
}

at::Tensor roi_align_backward(const at::Tensor& grad_in, const at::Tensor& rois_in,
                              at::IntArrayRef input_sizes, const RoiAlignOptions& o) {
  DETSEG_CHECK(input_sizes.size() == 4, "roi_align_backward: input sizes must be [B, C, H, W]");
  check_roi_inputs(rois_in, input_sizes[0], o, "roi_align_backward");
  const int64_t K = rois_in.size(0), B = input_sizes[0], C = input_sizes[1], H = input_sizes[2],
                W = input_sizes[3];
  const int64_t PH = o.output_size.first, PW = o.output_size.second;
  DETSEG_CHECK(grad_in.dim() == 4 && grad_in.size(0) == K && grad_in.size(1) == C &&
                   grad_in.size(2) == PH && grad_in.size(3) == PW,
               "roi_align_backward: expected grad [", K, ", ", C, ", ", PH, ", ", PW, "], got ",
               grad_in.sizes());
  const auto device = grad_in.device();
  if (K == 0 || C == 0) return at::zeros(input_sizes, grad_in.options());
  if (grad_in.is_cuda()) return cuda::roi_align_backward(grad_in, rois_in, input_sizes, o);
  auto grad = grad_in.to(at::kCPU).permute({0, 2, 3, 1}).contiguous();  // [K, PH, PW, C]
  auto rois = rois_in.to(at::kCPU, grad.scalar_type()).contiguous();
  auto grad_input = at::zeros({B, H, W, C}, grad.options());
  AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "roi_align_backward", [&] {
    const scalar_t* go = grad.data_ptr<scalar_t>();
    const scalar_t* r = rois.data_ptr<scalar_t>();
    scalar_t* gi = grad_input.data_ptr<scalar_t>();
    // Each thread owns a channel range of every pixel, so the scatter needs no atomics; ranges of
    // at least 16 channels keep the inner loop vectorized.
    const int64_t grain = std::max<int64_t>(16, C / std::max(1, at::get_num_threads()));
    at::parallel_for(0, C, grain, [&](int64_t c0, int64_t c1) {
      std::vector<Sample<scalar_t>> samples;
      for (int64_t k = 0; k < K; ++k) {
        auto g = region_samples(r + 5 * k, H, W, o, samples);
        const int64_t per_bin = g.grid_h * g.grid_w;
        const scalar_t count = static_cast<scalar_t>(g.count);
        scalar_t* image = gi + g.batch * H * W * C;
        const Sample<scalar_t>* s = samples.data();
        for (int64_t bin = 0; bin < PH * PW; ++bin) {
          const scalar_t* src = go + (k * PH * PW + bin) * C;
          for (int64_t i = 0; i < per_bin; ++i, ++s) {
            scalar_t *p1 = image + s->o1 * C, *p2 = image + s->o2 * C;
            scalar_t *p3 = image + s->o3 * C, *p4 = image + s->o4 * C;
            const scalar_t w1 = s->w1, w2 = s->w2, w3 = s->w3, w4 = s->w4;
            for (int64_t c = c0; c < c1; ++c) {
              const scalar_t v = src[c] / count;
              p1[c] += w1 * v;
              p2[c] += w2 * v;
              p3[c] += w3 * v;
              p4[c] += w4 * v;
            }
          }
        }
      }
    });
  });
  return grad_input.permute({0, 3, 1, 2}).contiguous().to(device);
}

at::Tensor boxes_to_rois(const std::vector<at::Tensor>& boxes_per_image) {
  DETSEG_CHECK(!boxes_per_image.empty(), "boxes_to_rois: no images");
  std::vector<at::Tensor> parts;
  for (size_t b = 0; b < boxes_per_image.size(); ++b) {
    const auto& bx = boxes_per_image[b];
    DETSEG_CHECK(bx.dim() == 2 && bx.size(1) == 4, "boxes_to_rois: image ", b,
                 " boxes must be [K, 4], got ", bx.sizes());
    parts.push_back(at::cat({at::full({bx.size(0), 1}, static_cast<double>(b), bx.options()), bx}, 1));
  }
  return at::cat(parts, 0);
}

}  // namespace detseg
