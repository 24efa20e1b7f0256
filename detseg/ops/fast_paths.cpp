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
    o.channels_last_weights = !env_off("DETSEG_CHANNELS_LAST");
    o.group_norm_plain = !env_off("DETSEG_GROUP_NORM_PLAIN");
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

int64_t to_fast_weight_layout(const std::vector<at::Tensor>& params) {
  if (!fast_paths().channels_last_weights) return 0;
  at::NoGradGuard no_grad;
  int64_t changed = 0;
  for (const at::Tensor& p : params) {
    if (p.dim() != 4 || !p.device().is_cpu() || !p.is_floating_point() || p.layout() != at::kStrided ||
        p.is_contiguous(at::MemoryFormat::ChannelsLast))
      continue;
    // set_data keeps the parameter's identity (autograd, module registration); only its storage
    // changes.
    p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
    ++changed;
  }
  return changed;
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

at::Tensor group_norm_input(const at::Tensor& x) {
  const bool plain = fast_paths().group_norm_plain && x.device().is_cpu() && x.layout() == at::kStrided &&
                     !x.is_contiguous() && x.is_contiguous(at::MemoryFormat::ChannelsLast);
  return plain ? x.contiguous() : x;
}

at::Tensor global_average_pool(const at::Tensor& x) {
  // The blocked layout has no mean kernel; its average pooling is one, and the 1x1 map is tiny.
  return x.is_mkldnn() ? at::adaptive_avg_pool2d(x, {1, 1}).to_dense() : x.mean({2, 3}, true);
}

}  // namespace detseg
