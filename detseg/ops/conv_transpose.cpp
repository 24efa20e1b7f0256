#include "detseg/ops/conv_transpose.h"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <vector>

#include "detseg/core/error.h"
#include "detseg/ops/gemm.h"
#include "detseg/ops/tracing.h"

namespace detseg {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// [C, O, a, b] -> [(O, a, b), C]: row 4 * o + 2 * a + b holds tap (a, b) of output channel o.
at::Tensor tap_rows(const at::Tensor& weight) {
  return weight.permute({1, 2, 3, 0}).reshape({4 * weight.size(1), weight.size(0)}).contiguous();
}

// y[o, 2i + a, 2j + b] = z[4o + 2a + b, i * w + j] + bias[o], one image.
void taps_to_pixels(const float* z, const float* bias, int64_t channels, int64_t h, int64_t w, float* y) {
  for (int64_t o = 0; o < channels; ++o) {
    const float shift = bias ? bias[o] : 0.f;
    for (int64_t a = 0; a < 2; ++a) {
      const float* z0 = z + (4 * o + 2 * a) * h * w;  // tap (a, 0); tap (a, 1) follows h * w later
      const float* z1 = z0 + h * w;
      for (int64_t i = 0; i < h; ++i) {
        float* row = y + (o * 2 * h + 2 * i + a) * 2 * w;
        for (int64_t j = 0; j < w; ++j) {
          row[2 * j] = z0[i * w + j] + shift;
          row[2 * j + 1] = z1[i * w + j] + shift;
        }
      }
    }
  }
}

// The inverse gather: dz[4o + 2a + b, i * w + j] = dy[o, 2i + a, 2j + b], one image.
void pixels_to_taps(const float* dy, int64_t channels, int64_t h, int64_t w, float* dz) {
  for (int64_t o = 0; o < channels; ++o) {
    for (int64_t a = 0; a < 2; ++a) {
      float* z0 = dz + (4 * o + 2 * a) * h * w;
      float* z1 = z0 + h * w;
      for (int64_t i = 0; i < h; ++i) {
        const float* row = dy + (o * 2 * h + 2 * i + a) * 2 * w;
        for (int64_t j = 0; j < w; ++j) {
          z0[i * w + j] = row[2 * j];
          z1[i * w + j] = row[2 * j + 1];
        }
      }
    }
  }
}

// Images in parallel, one single-threaded GEMM each, when there are enough of them (the mask
// head's RoIs); otherwise one image at a time with the GEMM threaded.
template <typename Fn>
void for_each_image(int64_t n, const Fn& fn) {
  if (n >= 2 * at::get_num_threads()) {
    at::parallel_for(0, n, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) fn(i, at::get_thread_num());
    });
  } else {
    for (int64_t i = 0; i < n; ++i) fn(i, 0);
  }
}

class ConvTranspose2x2 : public torch::autograd::Function<ConvTranspose2x2> {
 public:
  // bias travels as an optional: an undefined tensor is not a valid autograd input.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& weight,
                            const c10::optional<at::Tensor>& bias) {
    const at::Tensor x = x_in.contiguous();
    const at::Tensor taps = tap_rows(weight);
    const at::Tensor shift = bias.has_value() ? bias->contiguous() : at::Tensor();
    const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), o = weight.size(1);
    at::Tensor y = at::empty({n, o, 2 * h, 2 * w}, x.options());
    const float *px = x.data_ptr<float>(), *pt = taps.data_ptr<float>();
    const float* pb = shift.defined() ? shift.data_ptr<float>() : nullptr;
    float* py = y.data_ptr<float>();
    for_each_image(n, [&](int64_t i, int) {
      thread_local std::vector<float> z;
      z.resize(static_cast<size_t>(4 * o * h * w));
      sgemm(false, false, 4 * o, h * w, c, pt, px + i * c * h * w, 0.f, z.data());
      taps_to_pixels(z.data(), pb, o, h, w, py + i * o * 4 * h * w);
    });
    ctx->save_for_backward({x, taps});
    ctx->saved_data["has_bias"] = bias.has_value();
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &taps = saved[1];
    const at::Tensor dy = grads[0].contiguous();
    const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), o = taps.size(0) / 4;
    const bool want_dx = ctx->needs_input_grad(0), want_dw = ctx->needs_input_grad(1);
    const bool want_db = ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2);
    const int64_t threads = at::get_num_threads();
    at::Tensor dx = want_dx ? at::empty_like(x) : at::Tensor();
    // Per-thread sums of the tap-weight and bias gradients, added up at the end.
    at::Tensor dtaps = want_dw ? at::zeros({threads, 4 * o, c}, x.options()) : at::Tensor();
    at::Tensor dtap_bias = want_db ? at::zeros({threads, 4 * o}, x.options()) : at::Tensor();
    const float *px = x.data_ptr<float>(), *pt = taps.data_ptr<float>(), *pdy = dy.data_ptr<float>();
    for_each_image(n, [&](int64_t i, int thread) {
      thread_local std::vector<float> dz;
      dz.resize(static_cast<size_t>(4 * o * h * w));
      pixels_to_taps(pdy + i * o * 4 * h * w, o, h, w, dz.data());
      if (want_dx) sgemm(true, false, c, h * w, 4 * o, pt, dz.data(), 0.f, dx.data_ptr<float>() + i * c * h * w);
      if (want_dw)
        sgemm(false, true, 4 * o, c, h * w, dz.data(), px + i * c * h * w, 1.f, dtaps.data_ptr<float>() + thread * 4 * o * c);
      if (want_db) {
        float* db = dtap_bias.data_ptr<float>() + thread * 4 * o;
        for (int64_t r = 0; r < 4 * o; ++r) {
          float sum = 0.f;
          for (int64_t p = 0; p < h * w; ++p) sum += dz[r * h * w + p];
          db[r] += sum;
        }
      }
    });
    at::Tensor dweight = want_dw ? dtaps.sum(0).view({o, 2, 2, c}).permute({3, 0, 1, 2}).contiguous() : at::Tensor();
    at::Tensor dbias = want_db ? dtap_bias.sum(0).view({o, 4}).sum(1) : at::Tensor();
    return {dx, dweight, dbias};
  }
};

}  // namespace

at::Tensor conv_transpose2x2_stride2(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  DETSEG_CHECK(x.dim() == 4 && weight.dim() == 4 && weight.size(0) == x.size(1) && weight.size(2) == 2 &&
                   weight.size(3) == 2 && (!bias.defined() || bias.numel() == weight.size(1)),
               "conv_transpose2x2_stride2: expected x [N, C, H, W], weight [C, O, 2, 2] and bias [O], got ",
               x.sizes(), ", ", weight.sizes(), " and ", bias.defined() ? bias.sizes() : at::IntArrayRef{});
  // The tracer records plain ConvTranspose (every runtime has it); our kernel is invisible to it.
  // 2-d padding and dilation: the ONNX converter copies 1-element lists into wrong attributes.
  if (tracing()) return at::conv_transpose2d(x, weight, bias, {2, 2}, {0, 0}, {0, 0}, 1, {1, 1});
  const bool cpu_float = x.device().is_cpu() && x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat &&
                         x.layout() == at::kStrided && (!bias.defined() || bias.scalar_type() == at::kFloat);
  if (cpu_float && x.numel() > 0)
    return ConvTranspose2x2::apply(x, weight, bias.defined() ? c10::optional<at::Tensor>(bias) : c10::nullopt);
  // Elsewhere: tap (a, b) of channel o as output channel 4o + 2a + b of a 1x1 conv, which
  // pixel_shuffle(2) places at row offset a, column offset b.
  const at::Tensor taps = tap_rows(weight).view({4 * weight.size(1), weight.size(0), 1, 1});
  return at::pixel_shuffle(at::conv2d(x, taps, bias.defined() ? bias.repeat_interleave(4) : at::Tensor()), 2);
}

}  // namespace detseg
