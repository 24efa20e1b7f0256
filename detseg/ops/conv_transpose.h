// Implements: the 2x2, stride-2 transposed convolution of Mask R-CNN's mask head (conv5_mask).
//
// With kernel 2 and stride 2 the output pixels do not overlap: output (2i + a, 2j + b) is input
// pixel (i, j) times kernel tap (a, b) alone. So the op is one GEMM per image, taps [(O, a, b), C]
// times pixels [C, H * W], whose rows are then laid out in space (a pixel shuffle) with the bias;
// the backward pass gathers the output gradient back into tap rows for two more GEMMs.
// Why: LibTorch 1.13 runs ConvTranspose2d on the CPU as slow_conv_transpose2d (GEMM + col2im),
// and at::pixel_shuffle after a 1x1 conv is a slow 6-d permute. On the mask head (100 RoIs, 256
// channels, 14x14 -> 28x28) this measured 0.44-0.65x of at::conv_transpose2d's time forward and
// 0.55-0.60x forward + backward (docs/ops.md, "2x2 stride-2 transposed convolution").
#pragma once

#include <ATen/ATen.h>

namespace detseg {

// x [N, C, H, W], weight [C, O, 2, 2] (ConvTranspose2d's layout), bias [O] or undefined
// -> [N, O, 2H, 2W], differentiable. CPU float runs the GEMM kernel; other devices and dtypes the
// same arithmetic as a 1x1 conv and at::pixel_shuffle.
at::Tensor conv_transpose2x2_stride2(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace detseg
