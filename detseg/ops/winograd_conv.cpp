// Implements: 3x3 stride-1 convolution by Winograd's F(2x2, 3x3) and F(4x4, 3x3) on CPU, forward
// and backward.
//
// Notation (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015): an output
// tile Y (m x m) = A^T [ (G g G^T) . (B^T d B) ] A for a 3x3 kernel g and the t x t input tile d
// (t = m + 2) that covers it; the matrices are in Transform<m> below. Summed over input channels,
// each of the t^2 positions e of the t x t product is one GEMM:
//   M[e] (K x P) = U[e] (K x C) * V[e] (C x P), U = transformed weights, V = transformed tiles,
// P = number of output tiles over all images (and all inputs of a multi-input call).
// Backward: dx is the same convolution of dy with the kernel rotated by 180 degrees and its
// channel axes swapped; dU[e] = Z[e] * V[e]^T with Z = A dY A^T the output gradient taken back
// through A, and dg = G^T dU G.
#include "detseg/ops/winograd_conv.h"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>

#include "detseg/ops/gemm.h"
#include "detseg/ops/fast_paths.h"
#include "detseg/ops/tracing.h"

namespace detseg {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <int M>
struct Transform;

// F(2x2, 3x3): 16 multiplies per 4 outputs (direct: 36); exact up to float rounding (+, -, / 2).
template <>
struct Transform<2> {
  static constexpr int t = 4;
  static constexpr float BT[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  static constexpr float G[4][3] = {{1, 0, 0}, {.5f, .5f, .5f}, {.5f, -.5f, .5f}, {0, 0, 1}};
  static constexpr float AT[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
};

// F(4x4, 3x3) on the points 0, +-1, +-2: 36 multiplies per 16 outputs (direct: 144). Its larger
// coefficients cost some float accuracy: ~1e-6 to 1e-5 relative here, as cuDNN's and oneDNN's own
// Winograd kernels.
template <>
struct Transform<4> {
  static constexpr int t = 6;
  static constexpr float BT[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                     {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
  static constexpr float G[6][3] = {{1.f / 4, 0, 0},
                                    {-1.f / 6, -1.f / 6, -1.f / 6},
                                    {-1.f / 6, 1.f / 6, -1.f / 6},
                                    {1.f / 24, 1.f / 12, 1.f / 6},
                                    {1.f / 24, -1.f / 12, 1.f / 6},
                                    {0, 0, 1}};
  static constexpr float AT[4][6] = {
      {1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
};

// The tile transforms are separable: each applies a 1-D transform down the columns and then along
// the rows. Those 1-D transforms are written out term by term (the matrices above, zeros skipped),
// as general loops over the matrices were measured 2x slower than the GEMMs they feed.
template <int M>
struct Kernels1d;

template <>
struct Kernels1d<2> {
  static void input(const float* d, float* v) {  // B^T d, 4 -> 4
    v[0] = d[0] - d[2];
    v[1] = d[1] + d[2];
    v[2] = d[2] - d[1];
    v[3] = d[1] - d[3];
  }
  static void output(const float* m, float* y) {  // A^T m, 4 -> 2
    y[0] = m[0] + m[1] + m[2];
    y[1] = m[1] - m[2] - m[3];
  }
  static void grad_output(const float* dy, float* z) {  // A dy, 2 -> 4
    z[0] = dy[0];
    z[1] = dy[0] + dy[1];
    z[2] = dy[0] - dy[1];
    z[3] = -dy[1];
  }
};

template <>
struct Kernels1d<4> {
  static void input(const float* d, float* v) {  // B^T d, 6 -> 6
    v[0] = 4 * d[0] - 5 * d[2] + d[4];
    v[1] = -4 * (d[1] + d[2]) + d[3] + d[4];
    v[2] = 4 * (d[1] - d[2]) - d[3] + d[4];
    v[3] = 2 * (d[3] - d[1]) - d[2] + d[4];
    v[4] = 2 * (d[1] - d[3]) - d[2] + d[4];
    v[5] = 4 * d[1] - 5 * d[3] + d[5];
  }
  static void output(const float* m, float* y) {  // A^T m, 6 -> 4
    const float p12 = m[1] + m[2], m12 = m[1] - m[2], p34 = m[3] + m[4], m34 = m[3] - m[4];
    y[0] = m[0] + p12 + p34;
    y[1] = m12 + 2 * m34;
    y[2] = p12 + 4 * p34;
    y[3] = m12 + 8 * m34 + m[5];
  }
  static void grad_output(const float* dy, float* z) {  // A dy, 4 -> 6
    const float p02 = dy[0] + dy[2], p13 = dy[1] + dy[3], q02 = dy[0] + 4 * dy[2], q13 = 2 * dy[1] + 8 * dy[3];
    z[0] = dy[0];
    z[1] = p02 + p13;
    z[2] = p02 - p13;
    z[3] = q02 + q13;
    z[4] = q02 - q13;
    z[5] = dy[3];
  }
};

// The output tiles of one input, or with dilation d of one of its d x d sub-grids: a dilated 3x3
// conv (padding d) is d^2 independent undilated convs (padding 1), one on each sub-grid of pixels
// (ry + d i, rx + d j), so the transforms read and write those pixels and nothing else changes.
// th x tw tiles per image of the sh x sw sub-grid (m x m outputs each; the last row and column of
// tiles may reach past the map).
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

std::vector<Tiling> tilings_of(at::TensorList xs, int64_t d, int64_t m) {
  std::vector<Tiling> out;
  for (size_t i = 0; i < xs.size(); ++i) {
    const int64_t n = xs[i].size(0), h = xs[i].size(2), w = xs[i].size(3);
    for (int64_t ry = 0; ry < std::min(d, h); ++ry) {
      for (int64_t rx = 0; rx < std::min(d, w); ++rx) {
        const int64_t sh = (h - ry + d - 1) / d, sw = (w - rx + d - 1) / d;
        out.push_back({i, n, h, w, d, ry, rx, sh, sw, (sh + m - 1) / m, (sw + m - 1) / m});
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
  thread_local std::vector<float> buffers[3];  // transformed tiles, GEMM results, transformed weights
  if (static_cast<int64_t>(buffers[slot].size()) < floats) buffers[slot].resize(floats);
  return buffers[slot].data();
}

// One strip of tiles through a separable 1-D transform (In -> t values): down each of the wp columns
// of the In rows at `strip` into q (t rows of wp), then along q's rows, tile tx reading In values
// from column M tx; position (a, b) of tile tx goes to out[(a t + b) * es + tx].
template <int M, int In, typename Kernel>
void transform_strip(const float* strip, int64_t wp, int64_t tiles, float* q, float* out, int64_t es, Kernel kernel) {
  constexpr int T = Transform<M>::t;
  for (int64_t j = 0; j < wp; ++j) {
    float d[In], col[T];
    for (int i = 0; i < In; ++i) d[i] = strip[i * wp + j];
    kernel(d, col);
    for (int a = 0; a < T; ++a) q[a * wp + j] = col[a];
  }
  for (int a = 0; a < T; ++a) {
    const float* qa = q + a * wp;
    float* o = out + (a * T) * es;
    for (int64_t tx = 0; tx < tiles; ++tx) {
      float row[T];
      kernel(qa + M * tx, row);
      for (int b = 0; b < T; ++b) o[b * es + tx] = row[b];
    }
  }
}

// Channel c of segment s: v[e][c][q0 + (ty - ty0) * tw + tx] = (B^T d B)[e], d the t x t tile of
// x (image s.n) that starts one row and column before output tile (ty, tx), zero outside x. v has
// t^2 x C x width floats.
template <int M>
void input_transform(const float* x, const Tiling& t, const Segment& s, int64_t c, int64_t C, float* v, int64_t width,
                     std::vector<float>& scratch) {
  using W = Transform<M>;
  constexpr int T = W::t;
  const int64_t rows_in = M * (s.ty1 - s.ty0) + 2, wp = M * t.tw + 2, es = C * width;
  scratch.assign(rows_in * wp + T * wp, 0.f);
  float* pad = scratch.data();
  float* q = pad + rows_in * wp;  // B^T applied down the columns of one strip of tiles: T rows of wp
  // Sub-grid rows M ty0 - 1 .. M ty1, inside a zero border.
  const float* plane = x + (s.n * C + c) * t.h * t.w + t.ry * t.w + t.rx;
  for (int64_t i = 0; i < rows_in; ++i) {
    const int64_t y = M * s.ty0 - 1 + i;
    if (y >= 0 && y < t.sh) gather_row(plane + y * t.d * t.w, t.d, t.sw, &pad[i * wp + 1]);
  }
  float* out = v + c * width + s.q0;
  for (int64_t ty = 0; ty < s.ty1 - s.ty0; ++ty) {
    transform_strip<M, T>(&pad[M * ty * wp], wp, t.tw, q, out + ty * t.tw, es,
                          [](const float* d, float* v) { Kernels1d<M>::input(d, v); });
  }
}

// Output channel k of segment s: y[n][k] at tile (ty, tx) = A^T m A (+ bias[k]), m[e] = M[e][k][q],
// cropped to the map. m has t^2 x K x width floats.
template <int M>
void output_transform(const float* m, int64_t K, int64_t width, const Tiling& t, const Segment& s, int64_t k,
                      const float* bias, float* y, std::vector<float>& scratch) {
  using W = Transform<M>;
  constexpr int T = W::t;
  const int64_t es = K * width, wide = M * t.tw;
  scratch.resize(M * wide);
  const float bk = bias ? bias[k] : 0.f;
  const float* in = m + k * width + s.q0;
  float* plane = y + (s.n * K + k) * t.h * t.w + t.ry * t.w + t.rx;
  float* rows = scratch.data();  // M output rows of the strip
  for (int64_t ty = s.ty0; ty < s.ty1; ++ty) {
    const float* r = in + (ty - s.ty0) * t.tw;
    for (int64_t tx = 0; tx < t.tw; ++tx) {
      float u[M][T];  // A^T m down the columns
      for (int j = 0; j < T; ++j) {
        float col[T], out_col[M];
        for (int i = 0; i < T; ++i) col[i] = r[(i * T + j) * es + tx];
        Kernels1d<M>::output(col, out_col);
        for (int a = 0; a < M; ++a) u[a][j] = out_col[a];
      }
      for (int a = 0; a < M; ++a) {  // ... and A along the rows
        float y[M];
        Kernels1d<M>::output(u[a], y);
        for (int b = 0; b < M; ++b) rows[a * wide + M * tx + b] = y[b] + bk;
      }
    }
    for (int a = 0; a < M && M * ty + a < t.sh; ++a)
      scatter_row(rows + a * wide, t.sw, plane + (M * ty + a) * t.d * t.w, t.d);
  }
}

// Channel k of segment s: z[e][k][q] = (A dY A^T)[e] for the m x m tile dY of the output gradient
// at tile q (zero outside the map).
template <int M>
void grad_output_transform(const float* dy, const Tiling& t, const Segment& s, int64_t k, int64_t K, float* z,
                           int64_t width, std::vector<float>& scratch) {
  using W = Transform<M>;
  constexpr int T = W::t;
  const int64_t rows_in = M * (s.ty1 - s.ty0), wp = M * t.tw, es = K * width;
  scratch.assign(rows_in * wp + T * wp, 0.f);
  float* pad = scratch.data();
  float* q = pad + rows_in * wp;
  const float* plane = dy + (s.n * K + k) * t.h * t.w + t.ry * t.w + t.rx;
  for (int64_t i = 0; i < rows_in; ++i) {  // rows and columns past the map stay zero
    const int64_t y = M * s.ty0 + i;
    if (y < t.sh) gather_row(plane + y * t.d * t.w, t.d, t.sw, &pad[i * wp]);
  }
  float* out = z + k * width + s.q0;
  for (int64_t ty = 0; ty < s.ty1 - s.ty0; ++ty) {
    transform_strip<M, M>(&pad[M * ty * wp], wp, t.tw, q, out + ty * t.tw, es,
                          [](const float* d, float* z) { Kernels1d<M>::grad_output(d, z); });
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
template <int M>
at::Tensor weight_transform(const at::Tensor& w) {
  using W = Transform<M>;
  constexpr int T = W::t;
  const int64_t K = w.size(0), C = w.size(1), es = K * C;
  // Scratch, not a fresh tensor: t^2 K C floats (9 MB for 256 x 256 at t = 6) would fault in new
  // pages on every call. Only convolve() reads it, before the next transform.
  float* dst = scratch(2, T * T * es);
  const float* src = w.data_ptr<float>();
  // Blocks of kBlock (k, c) pairs, written out position by position: t^2 scattered stores per
  // pair, each on another page, were measured at 15 ms for 256 x 256 at t = 6.
  constexpr int64_t kBlock = 256;
  at::parallel_for(0, (es + kBlock - 1) / kBlock, 1, [&](int64_t blk0, int64_t blk1) {
    std::vector<float> block(T * T * kBlock);
    for (int64_t blk = blk0; blk < blk1; ++blk) {
      const int64_t b0 = blk * kBlock, count = std::min(kBlock, es - b0);
      for (int64_t o = 0; o < count; ++o) {
        const float* g = src + (b0 + o) * 9;
        float r[T][3];  // G g
        for (int i = 0; i < T; ++i) {
          for (int j = 0; j < 3; ++j) r[i][j] = W::G[i][0] * g[j] + W::G[i][1] * g[3 + j] + W::G[i][2] * g[6 + j];
        }
        for (int i = 0; i < T; ++i) {
          for (int j = 0; j < T; ++j) {
            block[(i * T + j) * kBlock + o] = r[i][0] * W::G[j][0] + r[i][1] * W::G[j][1] + r[i][2] * W::G[j][2];
          }
        }
      }
      for (int e = 0; e < T * T; ++e) std::memcpy(dst + e * es + b0, &block[e * kBlock], count * sizeof(float));
    }
  });
  return at::from_blob(dst, {T * T, K, C}, w.options());
}

// dg = G^T dU G: [t^2, K, C] -> [K, C, 3, 3].
template <int M>
at::Tensor weight_grad_transform(const at::Tensor& du) {
  using W = Transform<M>;
  constexpr int T = W::t;
  const int64_t K = du.size(1), C = du.size(2), es = K * C;
  at::Tensor dw = at::empty({K, C, 3, 3}, du.options());
  const float* src = du.data_ptr<float>();
  float* dst = dw.data_ptr<float>();
  constexpr int64_t kBlock = 256;  // read position by position, as weight_transform writes
  at::parallel_for(0, (es + kBlock - 1) / kBlock, 1, [&](int64_t blk0, int64_t blk1) {
    std::vector<float> block(T * T * kBlock);
    for (int64_t blk = blk0; blk < blk1; ++blk) {
      const int64_t b0 = blk * kBlock, count = std::min(kBlock, es - b0);
      for (int e = 0; e < T * T; ++e) std::memcpy(&block[e * kBlock], src + e * es + b0, count * sizeof(float));
      for (int64_t o = 0; o < count; ++o) {
        const int64_t b = b0 + o;
        float q[3][T];  // G^T dU
        for (int i = 0; i < 3; ++i) {
          for (int j = 0; j < T; ++j) {
            float sum = 0.f;
            for (int e = 0; e < T; ++e) sum += W::G[e][i] * block[(e * T + j) * kBlock + o];
            q[i][j] = sum;
          }
        }
        float* g = dst + b * 9;
        for (int i = 0; i < 3; ++i) {
          for (int j = 0; j < 3; ++j) {
            float sum = 0.f;
            for (int e = 0; e < T; ++e) sum += q[i][e] * W::G[e][j];
            g[3 * i + j] = sum;
          }
        }
      }
    }
  });
  return dw;
}

// The convolution of every x in xs with the transformed weights u ([t^2, K, C]), no autograd.
template <int M>
std::vector<at::Tensor> convolve(at::TensorList xs_in, const at::Tensor& u, const float* bias, int64_t dilation) {
  constexpr int TT = Transform<M>::t * Transform<M>::t;
  const int64_t K = u.size(1), C = u.size(2);
  std::vector<at::Tensor> xs, ys;
  for (const at::Tensor& x : xs_in) {
    xs.push_back(x.contiguous());
    ys.push_back(at::empty({x.size(0), K, x.size(2), x.size(3)}, u.options()));
  }
  const std::vector<Tiling> tilings = tilings_of(xs, dilation, M);
  const std::vector<Chunk> chunks = chunks_of(tilings);
  const int64_t most = widest(chunks);
  float* v = scratch(0, TT * C * most);
  float* m = scratch(1, TT * K * most);
  for (const Chunk& chunk : chunks) {
    const int64_t width = chunk.tiles;
    for_each_plane(chunk, C, [&](const Segment& s, int64_t c, std::vector<float>& scratch) {
      input_transform<M>(xs[tilings[s.tiling].input].data_ptr<float>(), tilings[s.tiling], s, c, C, v, width,
                         scratch);
    });
    for (int64_t e = 0; e < TT; ++e)
      sgemm(false, false, K, width, C, u.data_ptr<float>() + e * K * C, v + e * C * width, 0.f, m + e * K * width);
    for_each_plane(chunk, K, [&](const Segment& s, int64_t k, std::vector<float>& scratch) {
      output_transform<M>(m, K, width, tilings[s.tiling], s, k, bias, ys[tilings[s.tiling].input].data_ptr<float>(),
                          scratch);
    });
  }
  return ys;
}

// dU[e] = sum over tiles of Z[e] V[e]^T: the weight gradient in the transformed domain, [16, K, C].
template <int M>
at::Tensor transformed_weight_grad(at::TensorList xs_in, at::TensorList dys_in, int64_t K, int64_t C,
                                   int64_t dilation) {
  std::vector<at::Tensor> xs, dys;
  for (const at::Tensor& x : xs_in) xs.push_back(x.contiguous());
  for (const at::Tensor& dy : dys_in) dys.push_back(dy.contiguous());
  constexpr int TT = Transform<M>::t * Transform<M>::t;
  const std::vector<Tiling> tilings = tilings_of(xs, dilation, M);
  const std::vector<Chunk> chunks = chunks_of(tilings);
  const int64_t most = widest(chunks);
  float* v = scratch(0, TT * C * most);
  float* z = scratch(1, TT * K * most);
  at::Tensor du = at::zeros({TT, K, C}, at::TensorOptions().dtype(at::kFloat));
  for (const Chunk& chunk : chunks) {
    const int64_t width = chunk.tiles;
    for_each_plane(chunk, C, [&](const Segment& s, int64_t c, std::vector<float>& scratch) {
      input_transform<M>(xs[tilings[s.tiling].input].data_ptr<float>(), tilings[s.tiling], s, c, C, v, width,
                         scratch);
    });
    for_each_plane(chunk, K, [&](const Segment& s, int64_t k, std::vector<float>& scratch) {
      grad_output_transform<M>(dys[tilings[s.tiling].input].data_ptr<float>(), tilings[s.tiling], s, k, K, z, width,
                               scratch);
    });
    for (int64_t e = 0; e < TT; ++e)
      sgemm(false, true, K, C, width, z + e * K * width, v + e * C * width, 1.f, du.data_ptr<float>() + e * K * C);
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

// Forward and backward with F(M x M, 3 x 3).
template <int M>
struct Winograd {
  static std::vector<at::Tensor> forward(at::TensorList xs, const at::Tensor& weight, const float* bias,
                                         int64_t dilation) {
    return convolve<M>(xs, weight_transform<M>(weight.contiguous()), bias, dilation);
  }
  // dx = conv(dy, kernel rotated 180 degrees with in/out channels swapped), same padding and dilation.
  static std::vector<at::Tensor> input_grads(at::TensorList dys, const at::Tensor& weight, int64_t dilation) {
    const at::Tensor rotated = weight.flip({2, 3}).transpose(0, 1).contiguous();
    return convolve<M>(dys, weight_transform<M>(rotated), nullptr, dilation);
  }
  static at::Tensor weight_grad(at::TensorList xs, at::TensorList dys, int64_t K, int64_t C, int64_t dilation) {
    return weight_grad_transform<M>(transformed_weight_grad<M>(xs, dys, K, C, dilation));
  }
};

class WinogradConv3x3Function : public torch::autograd::Function<WinogradConv3x3Function> {
 public:
  static variable_list forward(AutogradContext* ctx, at::TensorList xs, const at::Tensor& weight,
                               const c10::optional<at::Tensor>& bias, int64_t dilation, int64_t tile) {
    const bool has_bias = bias.has_value() && bias->defined();
    std::vector<at::Tensor> saved(xs.begin(), xs.end());
    saved.push_back(weight);
    ctx->save_for_backward(saved);
    ctx->saved_data["has_bias"] = has_bias;
    ctx->saved_data["dilation"] = dilation;
    ctx->saved_data["tile"] = tile;
    const at::Tensor b = has_bias ? bias->contiguous() : at::Tensor();
    const float* b_data = has_bias ? b.data_ptr<float>() : nullptr;
    return tile == 4 ? Winograd<4>::forward(xs, weight, b_data, dilation)
                     : Winograd<2>::forward(xs, weight, b_data, dilation);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    std::vector<at::Tensor> xs = ctx->get_saved_variables();
    const at::Tensor w = xs.back();
    xs.pop_back();
    const size_t levels = xs.size();
    const int64_t K = w.size(0), C = w.size(1), dilation = ctx->saved_data["dilation"].toInt();
    const bool f4 = ctx->saved_data["tile"].toInt() == 4;
    std::vector<at::Tensor> dys(levels);
    for (size_t l = 0; l < levels; ++l) {
      dys[l] = grads[l].defined() ? grads[l].contiguous()
                                  : at::zeros({xs[l].size(0), K, xs[l].size(2), xs[l].size(3)}, w.options());
    }
    variable_list out(levels + 4);  // xs..., weight, bias, dilation, tile
    bool any_input_grad = false;
    for (size_t l = 0; l < levels; ++l) any_input_grad = any_input_grad || ctx->needs_input_grad(l);
    if (any_input_grad) {
      std::vector<at::Tensor> dxs =
          f4 ? Winograd<4>::input_grads(dys, w, dilation) : Winograd<2>::input_grads(dys, w, dilation);
      for (size_t l = 0; l < levels; ++l) {
        if (ctx->needs_input_grad(l)) out[l] = dxs[l];
      }
    }
    if (ctx->needs_input_grad(levels)) {
      out[levels] =
          f4 ? Winograd<4>::weight_grad(xs, dys, K, C, dilation) : Winograd<2>::weight_grad(xs, dys, K, C, dilation);
    }
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
                                         const c10::optional<at::Tensor>& bias, int64_t dilation, int64_t tile) {
  check_inputs(xs, weight, bias, dilation);
  TORCH_CHECK(tile == 2 || tile == 4, "winograd_conv3x3: output tile must be 2 or 4, got ", tile);
  return WinogradConv3x3Function::apply(xs, weight, bias, dilation, tile);
}

at::Tensor winograd_conv3x3(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                            int64_t dilation, int64_t tile) {
  return winograd_conv3x3(at::TensorList(x), weight, bias, dilation, tile)[0];
}

bool winograd_applies(const at::Tensor& x, const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
                      at::IntArrayRef dilation, int64_t groups) {
  // Dilated convs stay with oneDNN: winograd_conv3x3 computes them exactly, but bench_conv measured
  // no gain on DeepLab's atrous layer3/layer4 (0.97-1.18x); the sub-grid gathers eat the saving.
  return fast_paths().winograd && !tracing() && x.dim() == 4 && weight.dim() == 4 && weight.size(2) == 3 && weight.size(3) == 3 && groups == 1 &&
         all_equal(stride, 1) && all_equal(dilation, 1) && all_equal(padding, 1) && weight.size(0) >= 128 &&
         weight.size(1) >= 128 && x.size(0) * ((x.size(2) + 1) / 2) * ((x.size(3) + 1) / 2) >= 256 &&
         x.device().is_cpu() && x.layout() == at::kStrided && x.scalar_type() == at::kFloat &&
         weight.scalar_type() == at::kFloat && weight.layout() == at::kStrided;
}

}  // namespace detseg
