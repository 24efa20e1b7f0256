// Implements: 3x3 stride-1 convolution by Winograd F(2x2, 3x3) on CPU, forward and backward.
//
// Notation (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015): an output
// tile Y (2x2) = A^T [ (G g G^T) . (B^T d B) ] A for a 3x3 kernel g and the 4x4 input tile d that
// covers it, with
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],  G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
//   A^T = [1 1 1 0; 0 1 -1 -1].
// Summed over input channels, each of the 16 positions e of the 4x4 product is one GEMM:
//   M[e] (K x P) = U[e] (K x C) * V[e] (C x P), U = transformed weights, V = transformed tiles,
// P = number of output tiles over all images (and all inputs of a multi-input call).
// Backward: dx is the same convolution of dy with the kernel rotated by 180 degrees and its
// channel axes swapped; dU[e] = Z[e] * V[e]^T with Z = A dY A^T the output gradient taken back
// through A, and dg = G^T dU G.
#include "detseg/ops/winograd_conv.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>

namespace detseg {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The output tiles of one input, or with dilation d of one of its d x d sub-grids: a dilated 3x3
// conv (padding d) is d^2 independent undilated convs (padding 1), one on each sub-grid of pixels
// (ry + d i, rx + d j), so the transforms read and write those pixels and nothing else changes.
// th x tw tiles per image of the sh x sw sub-grid (2x2 outputs each; an odd size's last half
// outside).
struct Tiling {
  size_t input;
  int64_t n, h, w, d, ry, rx, sh, sw, th, tw;
};

// A run of whole tile rows ty0..ty1-1 of image n of tilings[tiling], placed at columns q0.. of a chunk.
struct Segment {
  size_t tiling;
  int64_t n, ty0, ty1, q0;
};

// Tiles are processed in chunks of about kChunkTiles (whole tile rows), so that the transformed
// tiles of a chunk stay in cache between the transforms and the GEMMs, and the buffers are small
// and reused (no fresh pages to fault in per call). 512 columns amortise the GEMMs' packing of the
// weights (measured against 256 and 1024 on RetinaNet's P3 conv and the mask head's).
constexpr int64_t kChunkTiles = 512;

struct Chunk {
  std::vector<Segment> segments;
  int64_t tiles = 0;
};

std::vector<Tiling> tilings_of(at::TensorList xs, int64_t d) {
  std::vector<Tiling> out;
  for (size_t i = 0; i < xs.size(); ++i) {
    const int64_t n = xs[i].size(0), h = xs[i].size(2), w = xs[i].size(3);
    for (int64_t ry = 0; ry < std::min(d, h); ++ry) {
      for (int64_t rx = 0; rx < std::min(d, w); ++rx) {
        const int64_t sh = (h - ry + d - 1) / d, sw = (w - rx + d - 1) / d;
        out.push_back({i, n, h, w, d, ry, rx, sh, sw, (sh + 1) / 2, (sw + 1) / 2});
      }
    }
  }
  return out;
}

// dst[j] = src[j * stride] for j < count (one sub-grid row).
void gather_row(const float* src, int64_t stride, int64_t count, float* dst) {
  if (stride == 1) {
    std::memcpy(dst, src, count * sizeof(float));
  } else {
    for (int64_t j = 0; j < count; ++j) dst[j] = src[j * stride];
  }
}

void scatter_row(const float* src, int64_t count, float* dst, int64_t stride) {
  if (stride == 1) {
    std::memcpy(dst, src, count * sizeof(float));
  } else {
    for (int64_t j = 0; j < count; ++j) dst[j * stride] = src[j];
  }
}

std::vector<Chunk> chunks_of(const std::vector<Tiling>& tilings) {
  std::vector<Chunk> chunks(1);
  for (size_t l = 0; l < tilings.size(); ++l) {
    const Tiling& t = tilings[l];
    for (int64_t n = 0; n < t.n; ++n) {
      for (int64_t ty = 0; ty < t.th;) {
        if (chunks.back().tiles + t.tw > kChunkTiles && chunks.back().tiles > 0) chunks.emplace_back();
        Chunk& c = chunks.back();
        const int64_t rows = std::max<int64_t>(1, std::min(t.th - ty, (kChunkTiles - c.tiles) / t.tw));
        c.segments.push_back({l, n, ty, ty + rows, c.tiles});
        c.tiles += rows * t.tw;
        ty += rows;
      }
    }
  }
  return chunks;
}

int64_t widest(const std::vector<Chunk>& chunks) {
  int64_t most = 0;
  for (const Chunk& c : chunks) most = std::max(most, c.tiles);
  return most;
}

// Grow-only scratch for the transformed tiles of one chunk, kept per thread between calls.
float* scratch(int slot, int64_t floats) {
  thread_local std::vector<float> buffers[2];
  if (static_cast<int64_t>(buffers[slot].size()) < floats) buffers[slot].resize(floats);
  return buffers[slot].data();
}

// Channel c of segment s: v[e][c][q0 + (ty - ty0) * tw + tx] = (B^T d B)[e], d the 4x4 tile of x (image s.n) that
// starts one row and column before output tile (ty, tx), zero outside x. v has 16 x C x width floats.
void input_transform(const float* x, const Tiling& t, const Segment& s, int64_t c, int64_t C, float* v, int64_t width,
                     std::vector<float>& scratch) {
  const int64_t rows_in = 2 * (s.ty1 - s.ty0) + 2, wp = 2 * t.tw + 2, es = C * width;
  scratch.assign(rows_in * wp + 4 * wp, 0.f);
  float* pad = scratch.data();
  // Sub-grid rows 2 ty0 - 1 .. 2 ty1, inside a zero border.
  const float* plane = x + (s.n * C + c) * t.h * t.w + t.ry * t.w + t.rx;
  for (int64_t i = 0; i < rows_in; ++i) {
    const int64_t y = 2 * s.ty0 - 1 + i;
    if (y >= 0 && y < t.sh) gather_row(plane + y * t.d * t.w, t.d, t.sw, &pad[i * wp + 1]);
  }
  float* out = v + c * width + s.q0;
  for (int64_t ty = 0; ty < s.ty1 - s.ty0; ++ty) {
    const float* r0 = &pad[2 * ty * wp];
    const float *r1 = r0 + wp, *r2 = r1 + wp, *r3 = r2 + wp;
    float *q0 = pad + rows_in * wp, *q1 = q0 + wp, *q2 = q1 + wp, *q3 = q2 + wp;
    for (int64_t j = 0; j < wp; ++j) {  // B^T applied down the columns
      q0[j] = r0[j] - r2[j];
      q1[j] = r1[j] + r2[j];
      q2[j] = r2[j] - r1[j];
      q3[j] = r1[j] - r3[j];
    }
    const float* q[4] = {q0, q1, q2, q3};
    for (int i = 0; i < 4; ++i) {  // ... and B along the rows
      const float* qi = q[i];
      float* o0 = out + (4 * i) * es + ty * t.tw;
      float *o1 = o0 + es, *o2 = o1 + es, *o3 = o2 + es;
      for (int64_t tx = 0; tx < t.tw; ++tx) {
        const float a = qi[2 * tx], b = qi[2 * tx + 1], c_ = qi[2 * tx + 2], d = qi[2 * tx + 3];
        o0[tx] = a - c_;
        o1[tx] = b + c_;
        o2[tx] = c_ - b;
        o3[tx] = b - d;
      }
    }
  }
}

// Output channel k of segment s: y[n][k] at tile (ty, tx) = A^T m A (+ bias[k]), m[e] = M[e][k][q],
// cropped to h x w. m has 16 x K x width floats.
void output_transform(const float* m, int64_t K, int64_t width, const Tiling& t, const Segment& s, int64_t k,
                      const float* bias, float* y, std::vector<float>& scratch) {
  const int64_t es = K * width, wide = 2 * t.tw;
  scratch.resize(2 * wide);
  const float bk = bias ? bias[k] : 0.f;
  const float* in = m + k * width + s.q0;
  float* plane = y + (s.n * K + k) * t.h * t.w + t.ry * t.w + t.rx;
  float *y0 = scratch.data(), *y1 = y0 + wide;
  for (int64_t ty = s.ty0; ty < s.ty1; ++ty) {
    const float* r = in + (ty - s.ty0) * t.tw;
    for (int64_t tx = 0; tx < t.tw; ++tx) {
      float u0[4], u1[4];
      for (int j = 0; j < 4; ++j) {  // A^T down the columns
        const float m0 = r[j * es + tx], m1 = r[(4 + j) * es + tx], m2 = r[(8 + j) * es + tx],
                    m3 = r[(12 + j) * es + tx];
        u0[j] = m0 + m1 + m2;
        u1[j] = m1 - m2 - m3;
      }
      y0[2 * tx] = u0[0] + u0[1] + u0[2] + bk;  // ... and A along the rows
      y0[2 * tx + 1] = u0[1] - u0[2] - u0[3] + bk;
      y1[2 * tx] = u1[0] + u1[1] + u1[2] + bk;
      y1[2 * tx + 1] = u1[1] - u1[2] - u1[3] + bk;
    }
    scatter_row(y0, t.sw, plane + 2 * ty * t.d * t.w, t.d);
    if (2 * ty + 1 < t.sh) scatter_row(y1, t.sw, plane + (2 * ty + 1) * t.d * t.w, t.d);
  }
}

// Channel k of segment s: z[e][k][q] = (A dY A^T)[e] for the 2x2 tile dY of the output gradient at tile q (zero
// outside).
void grad_output_transform(const float* dy, const Tiling& t, const Segment& s, int64_t k, int64_t K, float* z,
                           int64_t width, std::vector<float>& scratch) {
  const int64_t rows_in = 2 * (s.ty1 - s.ty0), wp = 2 * t.tw, es = K * width;
  scratch.assign(rows_in * wp + 4 * wp, 0.f);
  float* pad = scratch.data();
  const float* plane = dy + (s.n * K + k) * t.h * t.w + t.ry * t.w + t.rx;
  for (int64_t i = 0; i < rows_in; ++i) {  // odd sizes: the extra row/column stays zero
    const int64_t y = 2 * s.ty0 + i;
    if (y < t.sh) gather_row(plane + y * t.d * t.w, t.d, t.sw, &pad[i * wp]);
  }
  float* out = z + k * width + s.q0;
  for (int64_t ty = 0; ty < s.ty1 - s.ty0; ++ty) {
    const float *a = &pad[2 * ty * wp], *c = a + wp;
    float *q0 = pad + rows_in * wp, *q1 = q0 + wp, *q2 = q1 + wp, *q3 = q2 + wp;
    for (int64_t j = 0; j < wp; ++j) {  // A down the columns
      q0[j] = a[j];
      q1[j] = a[j] + c[j];
      q2[j] = a[j] - c[j];
      q3[j] = -c[j];
    }
    const float* q[4] = {q0, q1, q2, q3};
    for (int i = 0; i < 4; ++i) {  // ... and A^T along the rows
      const float* qi = q[i];
      float* o0 = out + (4 * i) * es + ty * t.tw;
      float *o1 = o0 + es, *o2 = o1 + es, *o3 = o2 + es;
      for (int64_t tx = 0; tx < t.tw; ++tx) {
        const float l = qi[2 * tx], r = qi[2 * tx + 1];
        o0[tx] = l;
        o1[tx] = l + r;
        o2[tx] = l - r;
        o3[tx] = -r;
      }
    }
  }
}

// Runs fn(segment, channel, scratch) for every segment of the chunk and every channel in one
// parallel region (one region per segment cost more than the work on small maps: 100 mask-head RoIs).
template <typename Fn>
void for_each_plane(const Chunk& chunk, int64_t channels, const Fn& fn) {
  const int64_t items = static_cast<int64_t>(chunk.segments.size()) * channels;
  at::parallel_for(0, items, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> scratch;
    for (int64_t i = i0; i < i1; ++i) fn(chunk.segments[i / channels], i % channels, scratch);
  });
}

// U[e][k][c] = (G g G^T)[e] for g = w[k][c] (3x3). w: [K, C, 3, 3] contiguous float.
at::Tensor weight_transform(const at::Tensor& w) {
  const int64_t K = w.size(0), C = w.size(1), es = K * C;
  at::Tensor u = at::empty({16, K, C}, w.options());
  const float* src = w.data_ptr<float>();
  float* dst = u.data_ptr<float>();
  at::parallel_for(0, es, 256, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const float* g = src + b * 9;
      float r[4][3];
      for (int j = 0; j < 3; ++j) {
        r[0][j] = g[j];
        r[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
        r[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
        r[3][j] = g[6 + j];
      }
      for (int i = 0; i < 4; ++i) {
        dst[(4 * i) * es + b] = r[i][0];
        dst[(4 * i + 1) * es + b] = 0.5f * (r[i][0] + r[i][1] + r[i][2]);
        dst[(4 * i + 2) * es + b] = 0.5f * (r[i][0] - r[i][1] + r[i][2]);
        dst[(4 * i + 3) * es + b] = r[i][2];
      }
    }
  });
  return u;
}

// dg = G^T dU G: [16, K, C] -> [K, C, 3, 3].
at::Tensor weight_grad_transform(const at::Tensor& du) {
  const int64_t K = du.size(1), C = du.size(2), es = K * C;
  at::Tensor dw = at::empty({K, C, 3, 3}, du.options());
  const float* src = du.data_ptr<float>();
  float* dst = dw.data_ptr<float>();
  at::parallel_for(0, es, 256, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      float d[16];
      for (int e = 0; e < 16; ++e) d[e] = src[e * es + b];
      float q[3][4];
      for (int j = 0; j < 4; ++j) {
        q[0][j] = d[j] + 0.5f * (d[4 + j] + d[8 + j]);
        q[1][j] = 0.5f * (d[4 + j] - d[8 + j]);
        q[2][j] = 0.5f * (d[4 + j] + d[8 + j]) + d[12 + j];
      }
      float* g = dst + b * 9;
      for (int i = 0; i < 3; ++i) {
        g[3 * i] = q[i][0] + 0.5f * (q[i][1] + q[i][2]);
        g[3 * i + 1] = 0.5f * (q[i][1] - q[i][2]);
        g[3 * i + 2] = 0.5f * (q[i][1] + q[i][2]) + q[i][3];
      }
    }
  });
  return dw;
}

// oneDNN's row-major sgemm, found at run time in the oneDNN that LibTorch links (Debian's links it
// as a shared library; builds with a static, hidden oneDNN fall back to at::mm). Preferred over
// at::mm (OpenBLAS here): it threads on the same OpenMP pool as the convolutions around it, where
// OpenBLAS's own spinning threads were measured to slow the next oneDNN conv by ~25 %, and it ran
// these shapes ~10 % faster.
using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, float*, int64_t);
DnnlSgemm dnnl_sgemm() {
  static const DnnlSgemm fn = reinterpret_cast<DnnlSgemm>(dlsym(RTLD_DEFAULT, "dnnl_sgemm"));
  return fn;
}

// c (m x n) = a (m x k) * b (k x n, or n x k when b_transposed) + beta * c; all row-major, dense.
void gemm(int64_t m, int64_t n, int64_t k, const float* a, const float* b, bool b_transposed, float beta, float* c) {
  if (DnnlSgemm fn = dnnl_sgemm();
      fn && fn('N', b_transposed ? 'T' : 'N', m, n, k, 1.f, a, k, b, b_transposed ? k : n, beta, c, n) == 0) {
    return;
  }
  const auto options = at::TensorOptions().dtype(at::kFloat);
  const at::Tensor ta = at::from_blob(const_cast<float*>(a), {m, k}, options);
  const at::Tensor tb = b_transposed ? at::from_blob(const_cast<float*>(b), {n, k}, options).t()
                                     : at::from_blob(const_cast<float*>(b), {k, n}, options);
  at::Tensor tc = at::from_blob(c, {m, n}, options);
  if (beta == 0.f) {
    at::mm_out(tc, ta, tb);
  } else {
    tc.addmm_(ta, tb, beta);
  }
}

// The convolution of every x in xs with the transformed weights u ([16, K, C]), no autograd.
std::vector<at::Tensor> convolve(at::TensorList xs_in, const at::Tensor& u, const float* bias, int64_t dilation) {
  const int64_t K = u.size(1), C = u.size(2);
  std::vector<at::Tensor> xs, ys;
  for (const at::Tensor& x : xs_in) {
    xs.push_back(x.contiguous());
    ys.push_back(at::empty({x.size(0), K, x.size(2), x.size(3)}, u.options()));
  }
  const std::vector<Tiling> tilings = tilings_of(xs, dilation);
  const std::vector<Chunk> chunks = chunks_of(tilings);
  const int64_t most = widest(chunks);
  float* v = scratch(0, 16 * C * most);
  float* m = scratch(1, 16 * K * most);
  for (const Chunk& chunk : chunks) {
    const int64_t width = chunk.tiles;
    for_each_plane(chunk, C, [&](const Segment& s, int64_t c, std::vector<float>& scratch) {
      input_transform(xs[tilings[s.tiling].input].data_ptr<float>(), tilings[s.tiling], s, c, C, v, width, scratch);
    });
    for (int64_t e = 0; e < 16; ++e)
      gemm(K, width, C, u.data_ptr<float>() + e * K * C, v + e * C * width, false, 0.f, m + e * K * width);
    for_each_plane(chunk, K, [&](const Segment& s, int64_t k, std::vector<float>& scratch) {
      output_transform(m, K, width, tilings[s.tiling], s, k, bias, ys[tilings[s.tiling].input].data_ptr<float>(),
                       scratch);
    });
  }
  return ys;
}

// dU[e] = sum over tiles of Z[e] V[e]^T: the weight gradient in the transformed domain, [16, K, C].
at::Tensor transformed_weight_grad(at::TensorList xs_in, at::TensorList dys_in, int64_t K, int64_t C,
                                   int64_t dilation) {
  std::vector<at::Tensor> xs, dys;
  for (const at::Tensor& x : xs_in) xs.push_back(x.contiguous());
  for (const at::Tensor& dy : dys_in) dys.push_back(dy.contiguous());
  const std::vector<Tiling> tilings = tilings_of(xs, dilation);
  const std::vector<Chunk> chunks = chunks_of(tilings);
  const int64_t most = widest(chunks);
  float* v = scratch(0, 16 * C * most);
  float* z = scratch(1, 16 * K * most);
  at::Tensor du = at::zeros({16, K, C}, at::TensorOptions().dtype(at::kFloat));
  for (const Chunk& chunk : chunks) {
    const int64_t width = chunk.tiles;
    for_each_plane(chunk, C, [&](const Segment& s, int64_t c, std::vector<float>& scratch) {
      input_transform(xs[tilings[s.tiling].input].data_ptr<float>(), tilings[s.tiling], s, c, C, v, width, scratch);
    });
    for_each_plane(chunk, K, [&](const Segment& s, int64_t k, std::vector<float>& scratch) {
      grad_output_transform(dys[tilings[s.tiling].input].data_ptr<float>(), tilings[s.tiling], s, k, K, z, width,
                            scratch);
    });
    for (int64_t e = 0; e < 16; ++e)
      gemm(K, C, width, z + e * K * width, v + e * C * width, true, 1.f, du.data_ptr<float>() + e * K * C);
  }
  return du;
}

void check_inputs(at::TensorList xs, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                  int64_t dilation) {
  TORCH_CHECK(!xs.empty(), "winograd_conv3x3: no inputs");
  TORCH_CHECK(dilation >= 1, "winograd_conv3x3: dilation must be >= 1, got ", dilation);
  TORCH_CHECK(weight.dim() == 4 && weight.size(2) == 3 && weight.size(3) == 3 && weight.scalar_type() == at::kFloat &&
                  weight.device().is_cpu(),
              "winograd_conv3x3: weight must be a CPU float [K, C, 3, 3], got ", weight.sizes());
  for (const at::Tensor& x : xs) {
    TORCH_CHECK(x.dim() == 4 && x.size(1) == weight.size(1) && x.scalar_type() == at::kFloat && x.device().is_cpu() &&
                    x.layout() == at::kStrided,
                "winograd_conv3x3: each input must be a CPU float [N, ", weight.size(1), ", H, W], got ", x.sizes());
  }
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == weight.size(0) && bias->scalar_type() == at::kFloat,
                "winograd_conv3x3: bias must be float [", weight.size(0), "], got ", bias->sizes());
  }
}

class WinogradConv3x3Function : public torch::autograd::Function<WinogradConv3x3Function> {
 public:
  static variable_list forward(AutogradContext* ctx, at::TensorList xs, const at::Tensor& weight,
                               const c10::optional<at::Tensor>& bias, int64_t dilation) {
    const bool has_bias = bias.has_value() && bias->defined();
    std::vector<at::Tensor> saved(xs.begin(), xs.end());
    saved.push_back(weight);
    ctx->save_for_backward(saved);
    ctx->saved_data["has_bias"] = has_bias;
    ctx->saved_data["dilation"] = dilation;
    const at::Tensor b = has_bias ? bias->contiguous() : at::Tensor();
    return convolve(xs, weight_transform(weight.contiguous()), has_bias ? b.data_ptr<float>() : nullptr, dilation);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    std::vector<at::Tensor> xs = ctx->get_saved_variables();
    const at::Tensor w = xs.back();
    xs.pop_back();
    const size_t levels = xs.size();
    const int64_t K = w.size(0), C = w.size(1), dilation = ctx->saved_data["dilation"].toInt();
    std::vector<at::Tensor> dys(levels);
    for (size_t l = 0; l < levels; ++l) {
      dys[l] = grads[l].defined() ? grads[l].contiguous()
                                  : at::zeros({xs[l].size(0), K, xs[l].size(2), xs[l].size(3)}, w.options());
    }
    variable_list out(levels + 3);  // xs..., weight, bias, dilation
    bool any_input_grad = false;
    for (size_t l = 0; l < levels; ++l) any_input_grad = any_input_grad || ctx->needs_input_grad(l);
    if (any_input_grad) {
      // dx = conv(dy, kernel rotated 180 degrees with in/out channels swapped), same padding and dilation.
      const at::Tensor rotated = w.flip({2, 3}).transpose(0, 1).contiguous();
      std::vector<at::Tensor> dxs = convolve(dys, weight_transform(rotated), nullptr, dilation);
      for (size_t l = 0; l < levels; ++l) {
        if (ctx->needs_input_grad(l)) out[l] = dxs[l];
      }
    }
    if (ctx->needs_input_grad(levels))
      out[levels] = weight_grad_transform(transformed_weight_grad(xs, dys, K, C, dilation));
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(levels + 1)) {
      at::Tensor db = at::zeros({K}, w.options());
      for (const at::Tensor& dy : dys) db += dy.sum({0, 2, 3});
      out[levels + 1] = db;
    }
    return out;
  }
};

bool all_equal(at::IntArrayRef values, int64_t v) {
  return !values.empty() && std::all_of(values.begin(), values.end(), [v](int64_t e) { return e == v; });
}

}  // namespace

std::vector<at::Tensor> winograd_conv3x3(at::TensorList xs, const at::Tensor& weight,
                                         const c10::optional<at::Tensor>& bias, int64_t dilation) {
  check_inputs(xs, weight, bias, dilation);
  return WinogradConv3x3Function::apply(xs, weight, bias, dilation);
}

at::Tensor winograd_conv3x3(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                            int64_t dilation) {
  return winograd_conv3x3(at::TensorList(x), weight, bias, dilation)[0];
}

bool winograd_applies(const at::Tensor& x, const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
                      at::IntArrayRef dilation, int64_t groups) {
  static const bool allowed = [] {
    const char* v = std::getenv("DETSEG_WINOGRAD");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  // Dilated convs stay with oneDNN: winograd_conv3x3 computes them exactly, but bench_conv measured
  // no gain on DeepLab's atrous layer3/layer4 (0.97-1.18x); the sub-grid gathers eat the saving.
  return allowed && x.dim() == 4 && weight.dim() == 4 && weight.size(2) == 3 && weight.size(3) == 3 && groups == 1 &&
         all_equal(stride, 1) && all_equal(dilation, 1) && all_equal(padding, 1) && weight.size(0) >= 128 &&
         weight.size(1) >= 128 && x.size(0) * ((x.size(2) + 1) / 2) * ((x.size(3) + 1) / 2) >= 256 &&
         x.device().is_cpu() && x.layout() == at::kStrided && x.scalar_type() == at::kFloat &&
         weight.scalar_type() == at::kFloat && weight.layout() == at::kStrided;
}

bool centre_tap_applies(const at::Tensor& x, const at::Tensor& weight, at::IntArrayRef stride,
                        at::IntArrayRef padding, at::IntArrayRef dilation) {
  return x.dim() == 4 && weight.dim() == 4 && weight.size(2) == 3 && weight.size(3) == 3 && dilation.size() == 2 &&
         padding.size() == 2 && all_equal(stride, 1) && padding[0] == dilation[0] && padding[1] == dilation[1] &&
         dilation[0] >= x.size(2) && dilation[1] >= x.size(3) && x.layout() == at::kStrided;
}

at::Tensor conv2d_fast(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                       at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  if (winograd_applies(x, weight, stride, padding, dilation, groups))
    return winograd_conv3x3(x, weight, bias, dilation[0]);
  if (centre_tap_applies(x, weight, stride, padding, dilation)) {
    const std::array<int64_t, 2> ones = {1, 1}, zeros = {0, 0};
    return at::conv2d(x, weight.slice(2, 1, 2).slice(3, 1, 2), bias, at::IntArrayRef(ones), at::IntArrayRef(zeros),
                      at::IntArrayRef(ones), groups);
  }
  return at::conv2d(x, weight, bias, stride, padding, dilation, groups);
}

}  // namespace detseg
