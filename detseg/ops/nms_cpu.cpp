// Implements: the NMS entry points (CUDA tensors go to nms_cuda.cu) and the CPU NMS kernels: greedy
// NMS with a uniform grid over kept boxes (nms, batched_nms) and soft-NMS.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "detseg/core/error.h"
#include "detseg/ops/cuda_kernels.h"
#include "detseg/ops/nms.h"

namespace detseg {

namespace {

void check_nms_inputs(const at::Tensor& boxes, const at::Tensor& scores, const char* what) {
  check_boxes(boxes, what);
  DETSEG_CHECK(scores.defined() && scores.dim() == 1, what, ": expected scores of shape [N], got ",
               scores.defined() ? scores.sizes() : at::IntArrayRef{});
  DETSEG_CHECK(scores.size(0) == boxes.size(0), what, ": ", boxes.size(0), " boxes but ",
               scores.size(0), " scores");
  DETSEG_CHECK(at::isFloatingType(scores.scalar_type()), what, ": expected floating scores, got ",
               scores.scalar_type());
  DETSEG_CHECK(scores.numel() == 0 || !at::isnan(scores).any().item<bool>(), what,
               ": scores contain NaN");
}

// Greedy NMS over `n` boxes already in decreasing-score order (x1..y2, area: [n] each).
// keep[i] is set to 1 for kept positions. A candidate survives iff no kept (earlier) box has
// IoU > thr with it, which is the all-pairs algorithm's outcome. Kept boxes are registered in a
// uniform grid (cell ~ typical box size); a candidate only visits the cells it touches, because a
// box with positive intersection must share one. Boxes spanning many cells go to a `wide` list that
// every candidate scans, so a few huge boxes never blow up the grid.
template <typename T>
void greedy_nms_sorted(const T* x1, const T* y1, const T* x2, const T* y2, const T* area, int64_t n,
                       double thr, uint8_t* keep) {
  auto suppresses = [&](int64_t i, int64_t j) {  // i kept (higher score), j candidate
    T xx1 = std::max(x1[i], x1[j]), yy1 = std::max(y1[i], y1[j]);
    T xx2 = std::min(x2[i], x2[j]), yy2 = std::min(y2[i], y2[j]);
    T w = std::max(static_cast<T>(0), xx2 - xx1), h = std::max(static_cast<T>(0), yy2 - yy1);
    T inter = w * h;
    T iou = inter / (area[i] + area[j] - inter);  // torchvision's arithmetic, bit for bit
    return iou > thr;
  };
  std::vector<int64_t> kept;
  kept.reserve(static_cast<size_t>(std::min<int64_t>(n, 4096)));

  // Bounds and typical size; non-finite coordinates or a negative threshold (where disjoint boxes
  // suppress each other) fall back to the plain all-kept scan.
  T minx = std::numeric_limits<T>::infinity(), miny = minx, maxx = -minx, maxy = -minx;
  double sum_w = 0, sum_h = 0;
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x1[i]) || !std::isfinite(y1[i]) || !std::isfinite(x2[i]) ||
        !std::isfinite(y2[i])) {
      finite = false;
      break;
    }
    minx = std::min(minx, std::min(x1[i], x2[i]));
    maxx = std::max(maxx, std::max(x1[i], x2[i]));
    miny = std::min(miny, std::min(y1[i], y2[i]));
    maxy = std::max(maxy, std::max(y1[i], y2[i]));
    sum_w += std::abs(double(x2[i]) - double(x1[i]));
    sum_h += std::abs(double(y2[i]) - double(y1[i]));
  }
  if (!finite || !(thr >= 0) || n < 64) {
    for (int64_t j = 0; j < n; ++j) {
      bool ok = true;
      for (int64_t i : kept)
        if (suppresses(i, j)) {
          ok = false;
          break;
        }
      keep[j] = ok;
      if (ok) kept.push_back(j);
    }
    return;
  }
  double span_x = std::max(double(maxx) - double(minx), 1e-12);
  double span_y = std::max(double(maxy) - double(miny), 1e-12);
  double cell_w = std::max(sum_w / n, span_x / 1024), cell_h = std::max(sum_h / n, span_y / 1024);
  int64_t gx = std::clamp<int64_t>(static_cast<int64_t>(span_x / cell_w), 1, 1024);
  int64_t gy = std::clamp<int64_t>(static_cast<int64_t>(span_y / cell_h), 1, 1024);
  while (gx * gy > 4 * n + 16) {  // bound memory for sparse, spread-out inputs
    gx = std::max<int64_t>(1, gx / 2);
    gy = std::max<int64_t>(1, gy / 2);
  }
  const double sx = gx / span_x, sy = gy / span_y;
  auto cx = [&](T v) {
    return std::clamp<int64_t>(static_cast<int64_t>((double(v) - double(minx)) * sx), 0, gx - 1);
  };
  auto cy = [&](T v) {
    return std::clamp<int64_t>(static_cast<int64_t>((double(v) - double(miny)) * sy), 0, gy - 1);
  };
  constexpr int64_t kWideCells = 16;
  std::vector<std::vector<int64_t>> cells(static_cast<size_t>(gx * gy));
  std::vector<int64_t> wide;
  for (int64_t j = 0; j < n; ++j) {
    int64_t c0 = cx(std::min(x1[j], x2[j])), c1 = cx(std::max(x1[j], x2[j]));
    int64_t r0 = cy(std::min(y1[j], y2[j])), r1 = cy(std::max(y1[j], y2[j]));
    bool ok = true;
    for (int64_t i : wide)
      if (suppresses(i, j)) {
        ok = false;
        break;
      }
    const int64_t ncells = (c1 - c0 + 1) * (r1 - r0 + 1);
    if (ok && ncells > static_cast<int64_t>(kept.size())) {
      for (int64_t i : kept)  // cheaper to scan every kept box than every touched cell
        if (suppresses(i, j)) {
          ok = false;
          break;
        }
    } else {
      for (int64_t r = r0; ok && r <= r1; ++r)
        for (int64_t c = c0; ok && c <= c1; ++c)
          for (int64_t i : cells[static_cast<size_t>(r * gx + c)])
            if (suppresses(i, j)) {
              ok = false;
              break;
            }
    }
    keep[j] = ok;
    if (!ok) continue;
    kept.push_back(j);
    if (ncells > kWideCells) {
      wide.push_back(j);
    } else {
      for (int64_t r = r0; r <= r1; ++r)
        for (int64_t c = c0; c <= c1; ++c) cells[static_cast<size_t>(r * gx + c)].push_back(j);
    }
  }
}

// Gathers the boxes at positions order[0..n) into SoA arrays and runs the greedy kernel;
// keep_out[k] tells whether order[k] survives.
template <typename T>
void nms_on_order(const T* boxes, const int64_t* order, int64_t n, double thr, uint8_t* keep_out) {
  std::vector<T> buf(static_cast<size_t>(5 * n));
  T *x1 = buf.data(), *y1 = x1 + n, *x2 = y1 + n, *y2 = x2 + n, *area = y2 + n;
  for (int64_t k = 0; k < n; ++k) {
    const T* b = boxes + 4 * order[k];
    x1[k] = b[0];
    y1[k] = b[1];
    x2[k] = b[2];
    y2[k] = b[3];
    area[k] = (b[2] - b[0]) * (b[3] - b[1]);
  }
  greedy_nms_sorted(x1, y1, x2, y2, area, n, thr, keep_out);
}

// Decreasing-score order, ties broken by lower index (a stable sort).
at::Tensor score_order(const at::Tensor& scores) {
  return std::get<1>(scores.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
}

}  // namespace

at::Tensor nms(const at::Tensor& boxes_in, const at::Tensor& scores_in, double iou_threshold) {
  check_nms_inputs(boxes_in, scores_in, "nms");
  DETSEG_CHECK(!std::isnan(iou_threshold), "nms: iou_threshold is NaN");
  const auto device = boxes_in.device();
  if (boxes_in.size(0) == 0) return at::empty({0}, boxes_in.options().dtype(at::kLong));
  if (boxes_in.is_cuda()) return cuda::nms(boxes_in, scores_in, iou_threshold);
  auto boxes = boxes_in.to(at::kCPU).contiguous();
  auto scores = scores_in.to(at::kCPU, boxes.scalar_type()).contiguous();
  auto order = score_order(scores).contiguous();
  const int64_t n = boxes.size(0);
  std::vector<uint8_t> keep(static_cast<size_t>(n));
  AT_DISPATCH_FLOATING_TYPES(boxes.scalar_type(), "nms", [&] {
    nms_on_order(boxes.data_ptr<scalar_t>(), order.data_ptr<int64_t>(), n, iou_threshold,
                 keep.data());
  });
  const int64_t* ord = order.data_ptr<int64_t>();
  std::vector<int64_t> out;
  for (int64_t k = 0; k < n; ++k)
    if (keep[static_cast<size_t>(k)]) out.push_back(ord[k]);
  return at::tensor(out, at::kLong).to(device);
}

at::Tensor batched_nms(const at::Tensor& boxes_in, const at::Tensor& scores_in,
                       const at::Tensor& classes_in, double iou_threshold) {
  check_nms_inputs(boxes_in, scores_in, "batched_nms");
  DETSEG_CHECK(classes_in.defined() && classes_in.dim() == 1 &&
                   classes_in.size(0) == boxes_in.size(0),
               "batched_nms: expected classes of shape [", boxes_in.size(0), "], got ",
               classes_in.defined() ? classes_in.sizes() : at::IntArrayRef{});
  DETSEG_CHECK(!at::isFloatingType(classes_in.scalar_type()) && classes_in.scalar_type() != at::kBool,
               "batched_nms: expected integer class ids, got ", classes_in.scalar_type());
  const auto device = boxes_in.device();
  const int64_t n = boxes_in.size(0);
  if (n == 0) return at::empty({0}, boxes_in.options().dtype(at::kLong));
  if (boxes_in.is_cuda()) return cuda::batched_nms(boxes_in, scores_in, classes_in, iou_threshold);
  auto boxes = boxes_in.to(at::kCPU).contiguous();
  auto scores = scores_in.to(at::kCPU, boxes.scalar_type()).contiguous();
  auto classes = classes_in.to(at::kCPU, at::kLong).contiguous();
  auto order = score_order(scores).contiguous();
  const int64_t* ord = order.data_ptr<int64_t>();
  const int64_t* cls = classes.data_ptr<int64_t>();

  // Group the score-ordered rows by class (stable, so each group stays in score order).
  std::vector<int64_t> grouped(ord, ord + n);
  std::stable_sort(grouped.begin(), grouped.end(),
                   [&](int64_t a, int64_t b) { return cls[a] < cls[b]; });
  std::vector<int64_t> starts{0};
  for (int64_t k = 1; k < n; ++k)
    if (cls[grouped[k]] != cls[grouped[k - 1]]) starts.push_back(k);
  starts.push_back(n);
  std::vector<uint8_t> keep_grouped(static_cast<size_t>(n));
  const int64_t groups = static_cast<int64_t>(starts.size()) - 1;
  AT_DISPATCH_FLOATING_TYPES(boxes.scalar_type(), "batched_nms", [&] {
    const scalar_t* b = boxes.data_ptr<scalar_t>();
    at::parallel_for(0, groups, 1, [&](int64_t g0, int64_t g1) {
      for (int64_t g = g0; g < g1; ++g)
        nms_on_order(b, grouped.data() + starts[g], starts[g + 1] - starts[g], iou_threshold,
                     keep_grouped.data() + starts[g]);
    });
  });
  std::vector<uint8_t> keep(static_cast<size_t>(n));  // by input row
  for (int64_t k = 0; k < n; ++k) keep[grouped[k]] = keep_grouped[k];
  std::vector<int64_t> out;
  for (int64_t k = 0; k < n; ++k)
    if (keep[ord[k]]) out.push_back(ord[k]);
  return at::tensor(out, at::kLong).to(device);
}

SoftNmsResult soft_nms(const at::Tensor& boxes_in, const at::Tensor& scores_in,
                       const SoftNmsOptions& opt) {
  check_nms_inputs(boxes_in, scores_in, "soft_nms");
  DETSEG_CHECK(opt.method != SoftNmsMethod::kGaussian || opt.sigma > 0,
               "soft_nms: Gaussian sigma must be > 0, got ", opt.sigma);
  if (boxes_in.is_cuda()) return cuda::soft_nms(boxes_in, scores_in, opt);
  const auto device = boxes_in.device();
  auto boxes = boxes_in.to(at::kCPU, at::kDouble).contiguous();
  auto scores = scores_in.to(at::kCPU, at::kDouble).contiguous();
  const int64_t n = boxes.size(0);
  const double* b = boxes.data_ptr<double>();
  std::vector<double> s(scores.data_ptr<double>(), scores.data_ptr<double>() + n);
  std::vector<int64_t> alive;
  for (int64_t i = 0; i < n; ++i)
    if (s[i] > opt.score_threshold) alive.push_back(i);
  auto area = [&](int64_t i) { return (b[4 * i + 2] - b[4 * i]) * (b[4 * i + 3] - b[4 * i + 1]); };
  std::vector<int64_t> out_idx;
  std::vector<double> out_score;
  const int64_t limit = opt.max_output < 0 ? n : opt.max_output;
  while (!alive.empty() && static_cast<int64_t>(out_idx.size()) < limit) {
    // Highest remaining score; equal scores: lower index first.
    size_t best = 0;
    for (size_t k = 1; k < alive.size(); ++k)
      if (s[alive[k]] > s[alive[best]] || (s[alive[k]] == s[alive[best]] && alive[k] < alive[best]))
        best = k;
    const int64_t i = alive[best];
    alive.erase(alive.begin() + static_cast<std::ptrdiff_t>(best));
    out_idx.push_back(i);
    out_score.push_back(s[i]);
    std::vector<int64_t> next;
    next.reserve(alive.size());
    for (int64_t j : alive) {
      double xx1 = std::max(b[4 * i], b[4 * j]), yy1 = std::max(b[4 * i + 1], b[4 * j + 1]);
      double xx2 = std::min(b[4 * i + 2], b[4 * j + 2]), yy2 = std::min(b[4 * i + 3], b[4 * j + 3]);
      double inter = std::max(0.0, xx2 - xx1) * std::max(0.0, yy2 - yy1);
      double uni = area(i) + area(j) - inter;
      double iou = uni > 0 ? inter / uni : 0.0;
      if (opt.method == SoftNmsMethod::kLinear) {
        if (iou > opt.iou_threshold) s[j] *= (1.0 - iou);
      } else {
        s[j] = iou > opt.iou_threshold ? 0.0 : s[j] * std::exp(-0.5 * iou * iou / opt.sigma);
      }
      if (s[j] > opt.score_threshold) next.push_back(j);
    }
    alive.swap(next);
  }
  SoftNmsResult r;
  r.indices = at::tensor(out_idx, at::kLong).to(device);
  r.scores = at::tensor(out_score, at::kDouble).to(scores_in.options());
  if (out_idx.empty()) {
    r.indices = at::empty({0}, at::TensorOptions(at::kLong).device(device));
    r.scores = at::empty({0}, scores_in.options());
  }
  return r;
}

}  // namespace detseg
