// Implements: 3x3 convolution (stride 1, padding = dilation) by Winograd's minimal filtering
// F(2x2, 3x3) or F(4x4, 3x3), on CPU float tensors, differentiable w.r.t. inputs, weight and bias.
//
// Why: on this class of CPU (AVX2, no NNPACK, oneDNN without its AVX-512 Winograd) session 5 took
// the direct convolution for running near the FMA peak (its timings held page faults; see
// winograd_applies for where Winograd still pays), so doing fewer multiplications looked like the
// only way to make the 3x3 convs of detection heads faster. F(2x2, 3x3) computes each 2x2
// output tile with 16 instead of 36 multiply-adds per (input, output) channel pair, as 16 GEMMs in
// the transformed domain. The three passes of training all use it: forward, input gradient (the
// same transform with the flipped, transposed kernel) and weight gradient (a GEMM of transformed
// output gradients with transformed inputs). Results match direct convolution to float rounding
// (relative ~1e-6: the transforms only add, subtract and halve).
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Optional.h>

#include <vector>

namespace detseg {

// y_l = conv2d(x_l, weight, bias, stride 1, padding = dilation, dilation) for every x_l in xs,
// with one set of 16 GEMMs over all the inputs' tiles together (a head shared across feature
// levels). xs: [N_l, C, H_l, W_l] float CPU; weight [K, C, 3, 3]; bias [K] or none. A dilated conv
// runs as d x d undilated ones on the sub-grids of pixels d apart (DeepLab's atrous backbones).
// Gradients flow to xs, weight, bias.
// tile: the output tile, 2 for F(2x2, 3x3) (16 multiplies per 4 outputs, relative error ~1e-6; the
// default) or 4 for F(4x4, 3x3) (36 per 16, ~1e-5). On RetinaNet's P3
// conv (256 channels, 40x40, batch 2) F(4x4) cut the GEMM time by 30 % but its larger transforms
// took most of that back: forward 1.2x slower, forward + backward 0.9x of F(2x2).
std::vector<at::Tensor> winograd_conv3x3(at::TensorList xs, const at::Tensor& weight,
                                         const c10::optional<at::Tensor>& bias, int64_t dilation = 1,
                                         int64_t tile = 2);
at::Tensor winograd_conv3x3(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                            int64_t dilation = 1, int64_t tile = 2);

// Whether conv2d(x, weight, ..., stride, padding, dilation, groups) may run as winograd_conv3x3:
// a 3x3 kernel with stride 1, padding 1, dilation 1, one group, at least 128 input and output
// channels and 256 output tiles (2x2 each, over the batch), on a strided CPU float x, and not
// switched off with DETSEG_WINOGRAD=0. Only RetinaNet's subnets ask (heads/retinanet_head.cpp): one
// call covers all five levels there, and that measured faster than oneDNN's per-level direct convs.
// Single convs no longer take it: once page faults were taken out of the picture (core/
// cpu_allocator.h) oneDNN's direct kernel won on every single-map shape that matters
// (bench/bench_conv: RetinaNet P3 head 1.2x / 1.3x slower as Winograd, mask head 1.2x / 1.6x,
// forward / forward + backward; FPN P2 and DeepLab's decoder a wash). Session 5's figures, which
// favoured Winograd, had the direct kernel paying for page faults that Winograd's reused scratch
// did not.
bool winograd_applies(const at::Tensor& x, const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
                      at::IntArrayRef dilation, int64_t groups);

}  // namespace detseg
