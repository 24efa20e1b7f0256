// Implements: the fast-path switches (see fast_paths.h).
#include "detseg/ops/fast_paths.h"

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

}  // namespace detseg
