#include "detseg/ops/gemm.h"

#include <ATen/ATen.h>
#include <dlfcn.h>

namespace detseg {
namespace {

using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, float*, int64_t);
DnnlSgemm dnnl_sgemm() {
  static const DnnlSgemm fn = reinterpret_cast<DnnlSgemm>(dlsym(RTLD_DEFAULT, "dnnl_sgemm"));
  return fn;
}

}  // namespace

void sgemm(bool a_transposed, bool b_transposed, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
           float beta, float* c) {
  const int64_t lda = a_transposed ? m : k, ldb = b_transposed ? k : n;
  if (DnnlSgemm fn = dnnl_sgemm();
      fn && fn(a_transposed ? 'T' : 'N', b_transposed ? 'T' : 'N', m, n, k, 1.f, a, lda, b, ldb, beta, c, n) == 0) {
    return;
  }
  const auto options = at::TensorOptions().dtype(at::kFloat);
  const at::Tensor ta = a_transposed ? at::from_blob(const_cast<float*>(a), {k, m}, options).t()
                                     : at::from_blob(const_cast<float*>(a), {m, k}, options);
  const at::Tensor tb = b_transposed ? at::from_blob(const_cast<float*>(b), {n, k}, options).t()
                                     : at::from_blob(const_cast<float*>(b), {k, n}, options);
  at::Tensor tc = at::from_blob(c, {m, n}, options);
  if (beta == 0.f) {
    at::mm_out(tc, ta, tb);
  } else {
    tc.addmm_(ta, tb, beta);
  }
}

}  // namespace detseg
