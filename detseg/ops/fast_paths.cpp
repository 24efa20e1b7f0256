// Implements: the fast-path switches (see fast_paths.h).
#include "detseg/ops/fast_paths.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>

#include <cstdlib>
#include <cstring>

#include "detseg/ops/tracing.h"

namespace detseg {
namespace {

bool env_off(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "0") == 0;
}

FastPathOptions& current() {
  static FastPathOptions options = [] {
    FastPathOptions o;
    o.mkldnn_inference = at::hasMKLDNN() && !env_off("DETSEG_MKLDNN_INFERENCE");
    return o;
  }();
  return options;
}

}  // namespace

const FastPathOptions& fast_paths() { return current(); }

void set_fast_paths(const FastPathOptions& options) {
  current() = options;
  current().mkldnn_inference = options.mkldnn_inference && at::hasMKLDNN();
}

bool mkldnn_inference_enabled(const at::Tensor& x, bool training) {
  return fast_paths().mkldnn_inference && !training && !tracing() && !at::GradMode::is_enabled() &&
         x.device().is_cpu() && x.scalar_type() == at::kFloat && x.layout() == at::kStrided;
}

at::Tensor to_fast_layout(const at::Tensor& x, bool training) {
  return mkldnn_inference_enabled(x, training) ? x.to_mkldnn() : x;
}

at::Tensor to_plain_layout(const at::Tensor& x) { return x.is_mkldnn() ? x.to_dense() : x; }

bool in_fast_layout(const at::Tensor& x) { return x.is_mkldnn(); }

at::Tensor global_average_pool(const at::Tensor& x) {
  // The blocked layout has no mean kernel; its average pooling is one, and the 1x1 map is tiny.
  return x.is_mkldnn() ? at::adaptive_avg_pool2d(x, {1, 1}).to_dense() : x.mean({2, 3}, true);
}

}  // namespace detseg
