// Implements: one dense row-major single-precision GEMM for the CPU kernels in ops/ (the 2x2
// transposed convolution).
#pragma once

#include <cstdint>

namespace detseg {

// c (m x n) = op(a) * op(b) + beta * c, all row-major and dense: op(a) is a (m x k), or a stored
// k x m when a_transposed; op(b) is b (k x n), or b stored n x k when b_transposed.
// Runs at::mm on views of the buffers (MKL in the PyPI wheel): inside an at::parallel_for it runs on
// the calling thread alone, as OpenMP does not nest.
void sgemm(bool a_transposed, bool b_transposed, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
           float beta, float* c);

}  // namespace detseg
