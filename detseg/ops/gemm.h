// Implements: one dense row-major single-precision GEMM for the CPU kernels in ops/ (Winograd
// convolution, the 2x2 transposed convolution).
#pragma once

#include <cstdint>

namespace detseg {

// c (m x n) = op(a) * op(b) + beta * c, all row-major and dense: op(a) is a (m x k), or a stored
// k x m when a_transposed; op(b) is b (k x n), or b stored n x k when b_transposed.
// Runs oneDNN's dnnl_sgemm, found at run time in the oneDNN that LibTorch links (Debian's links it
// as a shared library; builds with a static, hidden oneDNN fall back to at::mm). Preferred over
// at::mm (OpenBLAS here): it threads on the same OpenMP pool as the convolutions around it, and
// inside an at::parallel_for it runs on the calling thread alone, where OpenBLAS's own spinning
// threads were measured to slow the next oneDNN conv by ~25 %.
void sgemm(bool a_transposed, bool b_transposed, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
           float beta, float* c);

}  // namespace detseg
