// Implements: the CUDA NMS kernels: greedy (batched) NMS with the all-pairs bitmask algorithm of
// torchvision's nms_kernel.cu, and soft-NMS as one block that selects sequentially and decays in
// parallel. Same results as nms_cpu.cpp (same IoU arithmetic, same tie order).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "detseg/ops/cuda_kernels.h"

namespace detseg {

bool cuda_kernels_built() { return true; }

namespace cuda {

namespace {

using MaskWord = unsigned long long;
constexpr int kBoxesPerWord = 64;  // boxes per mask word, and threads per mask block
constexpr int kGatherThreads = 256;
constexpr int kSoftNmsThreads = 512;  // a power of two (tree reduction)

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// std::max / std::min's exact semantics, so ties and signed zeros resolve as on the CPU.
template <typename T>
__device__ __forceinline__ T max_of(T a, T b) { return a < b ? b : a; }
template <typename T>
__device__ __forceinline__ T min_of(T a, T b) { return b < a ? b : a; }

// IoU(a, b) > threshold with the CPU kernel's arithmetic (torchvision's), in T.
template <typename T>
__device__ __forceinline__ bool suppresses(const T* a, const T* b, double threshold) {
  const T w = max_of(T(0), min_of(a[2], b[2]) - max_of(a[0], b[0]));
  const T h = max_of(T(0), min_of(a[3], b[3]) - max_of(a[1], b[1]));
  const T inter = w * h;
  const T area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
  return inter / (area_a + area_b - inter) > threshold;
}

// mask[i][w] bit b: box i (score order) suppresses box 64 * w + b, for w >= i's word. Boxes of
// different classes (when `classes` is given) never suppress each other: exact per-class NMS,
// where torchvision's coordinate offsets would change the float rounding.
template <typename T>
__global__ void nms_mask_kernel(int64_t n, double threshold, const T* __restrict__ boxes,
                                const int64_t* __restrict__ classes, MaskWord* __restrict__ mask) {
  const int64_t row_word = blockIdx.y, col_word = blockIdx.x;
  if (row_word > col_word) return;  // only later boxes can be suppressed
  const int64_t words = (n + kBoxesPerWord - 1) / kBoxesPerWord;
  const int row_count = static_cast<int>(min(n - row_word * kBoxesPerWord, int64_t(kBoxesPerWord)));
  const int col_count = static_cast<int>(min(n - col_word * kBoxesPerWord, int64_t(kBoxesPerWord)));
  __shared__ T col_boxes[kBoxesPerWord * 4];
  __shared__ int64_t col_classes[kBoxesPerWord];
  const int t = threadIdx.x;
  if (t < col_count) {
    const int64_t j = col_word * kBoxesPerWord + t;
    for (int k = 0; k < 4; ++k) col_boxes[t * 4 + k] = boxes[j * 4 + k];
    if (classes) col_classes[t] = classes[j];
  }
  __syncthreads();
  if (t >= row_count) return;
  const int64_t i = row_word * kBoxesPerWord + t;
  const T* box = boxes + i * 4;
  const int64_t box_class = classes ? classes[i] : 0;
  MaskWord bits = 0;
  for (int j = row_word == col_word ? t + 1 : 0; j < col_count; ++j) {
    if (classes && col_classes[j] != box_class) continue;
    if (suppresses(box, col_boxes + j * 4, threshold)) bits |= MaskWord(1) << j;
  }
  mask[i * words + col_word] = bits;
}

// The greedy pass over the mask in score order (one block; `removed` lives in shared memory).
__global__ void nms_gather_kernel(int64_t n, const MaskWord* __restrict__ mask, bool* keep) {
  extern __shared__ MaskWord removed[];
  const int64_t words = (n + kBoxesPerWord - 1) / kBoxesPerWord;
  for (int64_t w = threadIdx.x; w < words; w += blockDim.x) removed[w] = 0;
  __syncthreads();
  for (int64_t word = 0; word < words; ++word) {
    MaskWord removed_now = removed[word];
    __syncthreads();
    for (int bit = 0; bit < kBoxesPerWord; ++bit) {
      const int64_t i = word * kBoxesPerWord + bit;
      if (i >= n) break;
      if (removed_now & (MaskWord(1) << bit)) continue;
      if (threadIdx.x == 0) keep[i] = true;
      const MaskWord* row = mask + i * words;
      for (int64_t w = word + threadIdx.x; w < words; w += blockDim.x) removed[w] |= row[w];
      __syncthreads();
      removed_now = removed[word];
      __syncthreads();  // everyone read it before the next kept box's row is or-ed in
    }
  }
}

// Greedy NMS in decreasing-score order (stable: equal scores keep the lower index first);
// `classes` (int64, may be undefined) restricts suppression to equal ids.
at::Tensor greedy_nms(const at::Tensor& boxes_in, const at::Tensor& scores_in,
                      const at::Tensor& classes_in, double threshold) {
  c10::cuda::CUDAGuard guard(boxes_in.device());
  const int64_t n = boxes_in.size(0);
  auto scores = scores_in.to(boxes_in.device(), boxes_in.scalar_type());
  auto order = std::get<1>(scores.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
  auto boxes = boxes_in.index_select(0, order).contiguous();
  at::Tensor classes;
  if (classes_in.defined()) classes = classes_in.to(boxes.device(), at::kLong).index_select(0, order);
  const int64_t words = ceil_div(n, kBoxesPerWord);
  auto mask = at::empty({n, words}, boxes.options().dtype(at::kLong));
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(boxes.scalar_type(), "nms_cuda", [&] {
    nms_mask_kernel<scalar_t><<<dim3(words, words), kBoxesPerWord, 0, stream>>>(
        n, threshold, boxes.data_ptr<scalar_t>(),
        classes.defined() ? classes.data_ptr<int64_t>() : nullptr,
        reinterpret_cast<MaskWord*>(mask.data_ptr<int64_t>()));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  auto keep = at::zeros({n}, boxes.options().dtype(at::kBool));
  const size_t shared = static_cast<size_t>(words) * sizeof(MaskWord);
  if (shared > 48 * 1024)  // past the default limit (above ~393k boxes) ask for more explicitly
    C10_CUDA_CHECK(cudaFuncSetAttribute(nms_gather_kernel,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(shared)));
  const int threads = static_cast<int>(std::min<int64_t>(words, kGatherThreads));
  nms_gather_kernel<<<1, threads, shared, stream>>>(
      n, reinterpret_cast<const MaskWord*>(mask.data_ptr<int64_t>()), keep.data_ptr<bool>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return order.masked_select(keep);
}

struct Candidate {
  double score;
  int64_t index;  // < 0: none
};

// a ranks before b: higher score, equal scores lower index (the CPU loop's order).
__device__ __forceinline__ bool ranks_before(const Candidate& a, const Candidate& b) {
  if (a.index < 0) return false;
  if (b.index < 0) return true;
  return a.score > b.score || (a.score == b.score && a.index < b.index);
}

struct SoftNmsParams {
  int64_t n, limit;
  bool linear;
  double sigma, iou_threshold, score_threshold;
};

// One block runs soft_nms's loop: each step picks the best alive box (block reduction), then every
// thread decays its own strided share of the rest, with the CPU kernel's double arithmetic.
__global__ void soft_nms_kernel(SoftNmsParams p, const double* __restrict__ boxes, double* scores,
                                bool* alive, int64_t* out_index, double* out_score,
                                int64_t* out_count) {
  __shared__ Candidate best[kSoftNmsThreads];
  const int t = threadIdx.x;
  for (int64_t j = t; j < p.n; j += blockDim.x) alive[j] = scores[j] > p.score_threshold;
  int64_t count = 0;
  while (count < p.limit) {
    Candidate mine{0.0, -1};
    for (int64_t j = t; j < p.n; j += blockDim.x)
      if (alive[j] && ranks_before(Candidate{scores[j], j}, mine)) mine = Candidate{scores[j], j};
    best[t] = mine;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
      if (t < stride && ranks_before(best[t + stride], best[t])) best[t] = best[t + stride];
      __syncthreads();
    }
    const Candidate top = best[0];
    __syncthreads();  // best[] is rewritten in the next step
    if (top.index < 0) break;
    const int64_t i = top.index;
    if (t == 0) {
      out_index[count] = i;
      out_score[count] = top.score;
      alive[i] = false;
    }
    ++count;
    const double* a = boxes + 4 * i;
    const double area_a = (a[2] - a[0]) * (a[3] - a[1]);
    for (int64_t j = t; j < p.n; j += blockDim.x) {
      if (j == i || !alive[j]) continue;
      const double* b = boxes + 4 * j;
      const double inter = max_of(0.0, min_of(a[2], b[2]) - max_of(a[0], b[0])) *
                           max_of(0.0, min_of(a[3], b[3]) - max_of(a[1], b[1]));
      const double uni = area_a + (b[2] - b[0]) * (b[3] - b[1]) - inter;
      const double iou = uni > 0 ? inter / uni : 0.0;
      double s = scores[j];
      if (p.linear) {
        if (iou > p.iou_threshold) s *= (1.0 - iou);
      } else {
        s = iou > p.iou_threshold ? 0.0 : s * exp(-0.5 * iou * iou / p.sigma);
      }
      scores[j] = s;
      if (s <= p.score_threshold) alive[j] = false;
    }
    __syncthreads();
  }
  if (t == 0) *out_count = count;
}

}  // namespace

at::Tensor nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  return greedy_nms(boxes, scores, at::Tensor(), iou_threshold);
}

at::Tensor batched_nms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& classes,
                       double iou_threshold) {
  return greedy_nms(boxes, scores, classes, iou_threshold);
}

SoftNmsResult soft_nms(const at::Tensor& boxes_in, const at::Tensor& scores_in,
                       const SoftNmsOptions& o) {
  c10::cuda::CUDAGuard guard(boxes_in.device());
  const auto device = boxes_in.device();
  const int64_t n = boxes_in.size(0);
  const int64_t limit = o.max_output < 0 ? n : std::min(o.max_output, n);
  SoftNmsResult r;
  if (limit == 0) {
    r.indices = at::empty({0}, boxes_in.options().dtype(at::kLong));
    r.scores = at::empty({0}, scores_in.options().device(device));
    return r;
  }
  auto boxes = boxes_in.to(at::kDouble).contiguous();
  auto scores = scores_in.to(device, at::kDouble, /*non_blocking=*/false, /*copy=*/true).contiguous();
  auto alive = at::empty({n}, boxes.options().dtype(at::kBool));
  auto out_index = at::empty({limit}, boxes.options().dtype(at::kLong));
  auto out_score = at::empty({limit}, boxes.options());
  auto out_count = at::empty({1}, boxes.options().dtype(at::kLong));
  const SoftNmsParams p{n, limit, o.method == SoftNmsMethod::kLinear, o.sigma, o.iou_threshold,
                        o.score_threshold};
  soft_nms_kernel<<<1, kSoftNmsThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      p, boxes.data_ptr<double>(), scores.data_ptr<double>(), alive.data_ptr<bool>(),
      out_index.data_ptr<int64_t>(), out_score.data_ptr<double>(), out_count.data_ptr<int64_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const int64_t count = out_count.item<int64_t>();
  r.indices = out_index.slice(0, 0, count);
  r.scores = out_score.slice(0, 0, count).to(scores_in.scalar_type());
  return r;
}

}  // namespace cuda
}  // namespace detseg
