// Implements: how close a timed step comes to the machine's limit. FlopCounter counts the
// multiply-adds (x2) of the convolutions and matrix products that ATen runs while it is alive,
// forward and backward, from each op's input shapes (ATen's RecordFunction observer); gemm_peak
// measures the GFLOP/s that ATen's sgemm reaches on the same threads, the ceiling those ops share.
#pragma once

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

namespace detseg::bench {

class FlopCounter {
 public:
  FlopCounter() {
    total() = 0;
    handle_ = at::addGlobalCallback(at::RecordFunctionCallback(&FlopCounter::enter, &FlopCounter::leave)
                                        .needsInputs(true)
                                        .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  }
  ~FlopCounter() { at::removeCallback(handle_); }
  FlopCounter(const FlopCounter&) = delete;
  FlopCounter& operator=(const FlopCounter&) = delete;

  double flops() const { return static_cast<double>(total().load()); }

 private:
  static std::atomic<int64_t>& total() {
    static std::atomic<int64_t> n{0};
    return n;
  }
  // Ops counted are not counted again inside one another (convolution -> mkldnn_convolution).
  static int& depth() {
    thread_local int d = 0;
    return d;
  }
  static std::vector<int64_t> ints(const c10::IValue& v) {
    return v.isIntList() ? v.toIntVector() : std::vector<int64_t>{};
  }
  static std::vector<int64_t> sizes(const c10::IValue& v) {
    return v.isTensor() && v.toTensor().defined() ? v.toTensor().sizes().vec() : std::vector<int64_t>{};
  }
  static int64_t at_or(const std::vector<int64_t>& v, size_t i, int64_t fallback) {
    return v.empty() ? fallback : v[std::min(i, v.size() - 1)];
  }
  // 2 x the multiply-adds of a (possibly transposed) N-d convolution of `in` by `w`.
  static int64_t conv_flops(const std::vector<int64_t>& in, const std::vector<int64_t>& w,
                            const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                            const std::vector<int64_t>& dilation, bool transposed, int64_t groups) {
    if (in.size() < 3 || w.size() != in.size()) return 0;
    int64_t kernel = 1, positions = 1;
    for (size_t d = 2; d < w.size(); ++d) {
      kernel *= w[d];
      const int64_t i = in[d], k = w[d];
      const int64_t s = at_or(stride, d - 2, 1), p = at_or(padding, d - 2, 0), dl = at_or(dilation, d - 2, 1);
      positions *= transposed ? i : (i + 2 * p - dl * (k - 1) - 1) / s + 1;
    }
    // Plain: each output position of each of w[0] filters sums in[1]/groups x kernel products.
    // Transposed: each input position scatters through in[1] x w[1] (per group) x kernel products.
    const int64_t per_position = transposed ? in[1] * w[1] * kernel : w[0] * (w[1]) * kernel;
    (void)groups;  // w[1] is already in_channels / groups (plain) or out_channels / groups (transposed)
    return 2 * in[0] * positions * per_position;
  }
  static int64_t op_flops(const at::RecordFunction& fn) {
    const std::string name = fn.name();
    const auto inputs = fn.inputs();
    auto tensor_sizes = [&](size_t i) { return i < inputs.size() ? sizes(inputs[i]) : std::vector<int64_t>{}; };
    auto int_list = [&](size_t i) { return i < inputs.size() ? ints(inputs[i]) : std::vector<int64_t>{}; };
    if (name == "aten::mm" || name == "aten::addmm") {
      const auto a = tensor_sizes(name == "aten::mm" ? 0 : 1), b = tensor_sizes(name == "aten::mm" ? 1 : 2);
      return a.size() == 2 && b.size() == 2 ? 2 * a[0] * a[1] * b[1] : 0;
    }
    if (name == "aten::bmm" || name == "aten::baddbmm") {
      const auto a = tensor_sizes(name == "aten::bmm" ? 0 : 1), b = tensor_sizes(name == "aten::bmm" ? 1 : 2);
      return a.size() == 3 && b.size() == 3 ? 2 * a[0] * a[1] * a[2] * b[2] : 0;
    }
    if (name == "aten::convolution" && inputs.size() >= 9) {
      return conv_flops(tensor_sizes(0), tensor_sizes(1), int_list(3), int_list(4), int_list(5),
                        inputs[6].isBool() && inputs[6].toBool(), inputs[8].isInt() ? inputs[8].toInt() : 1);
    }
    if (name == "aten::convolution_backward" && inputs.size() >= 11) {
      // grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
      // groups, output_mask: the input and the weight gradient each cost one forward's products.
      const int64_t forward = conv_flops(tensor_sizes(1), tensor_sizes(2), int_list(4), int_list(5), int_list(6),
                                         inputs[7].isBool() && inputs[7].toBool(), 1);
      int64_t passes = 0;
      if (inputs[10].isBoolList()) {
        const auto mask = inputs[10].toBoolList();
        passes = (mask.size() > 0 && mask.get(0)) + (mask.size() > 1 && mask.get(1));
      }
      return forward * passes;
    }
    return 0;
  }
  static bool counted(const std::string& name) {
    return name == "aten::mm" || name == "aten::addmm" || name == "aten::bmm" || name == "aten::baddbmm" ||
           name == "aten::convolution" || name == "aten::convolution_backward";
  }
  static std::unique_ptr<at::ObserverContext> enter(const at::RecordFunction& fn) {
    if (!counted(fn.name())) return nullptr;
    if (depth()++ == 0) total() += op_flops(fn);
    return nullptr;
  }
  static void leave(const at::RecordFunction& fn, at::ObserverContext*) {
    if (counted(fn.name())) --depth();
  }

  at::CallbackHandle handle_;
};

// The best GFLOP/s of ATen's float32 matrix product (MKL / oneDNN sgemm) on the current threads,
// over square sizes that fit a step's layers.
inline double gemm_peak_gflops() {
  double best = 0;
  for (int64_t n : {512, 1024, 2048}) {
    const at::Tensor a = at::rand({n, n}), b = at::rand({n, n});
    at::Tensor c = at::mm(a, b);  // warm-up
    const int reps = n <= 512 ? 20 : n <= 1024 ? 6 : 2;
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) at::mm_out(c, a, b);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * n * n * n * reps / s / 1e9);
  }
  return best;
}

}  // namespace detseg::bench
