#include "detseg/ops/gemm.h"

#include <ATen/ATen.h>

namespace detseg {

void sgemm(bool a_transposed, bool b_transposed, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
           float beta, float* c) {
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
