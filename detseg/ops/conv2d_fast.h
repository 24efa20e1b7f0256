// Implements: conv2d_fast, at::conv2d with exact shortcuts for dilated 3x3 convs whose taps read
// mostly zero padding (DeepLab's ASPP on small maps): a rate that covers the map runs as the centre
// tap alone, a rate whose taps read >= 40 % padding as nine 1x1 convs over only the in-map pixels.
// Same sums up to rounding order, differentiable.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Optional.h>

namespace detseg {

// Whether a 3x3 stride-1 conv with padding = dilation >= the map's height and width equals its
// centre tap as a 1x1 conv: every other tap reads only zero padding (ASPP's rate 36 on 32x32).
// Any layout: the oneDNN inference path (models/layers/conv_bn_act.cpp) asks it too.
bool centre_tap_applies(const at::Tensor& x, const at::Tensor& weight, at::IntArrayRef stride,
                        at::IntArrayRef padding, at::IntArrayRef dilation);

// The share of a dilated 3x3 conv's tap-pixel products that read inside the map rather than its
// zero padding (padding = dilation): 1 for a small rate, 1/9 once the rate reaches the map's size.
double valid_tap_fraction(const at::Tensor& x, at::IntArrayRef dilation);

// Whether a dilated 3x3 stride-1 conv (padding = dilation, one group) reads padding for at least 40 %
// of its products (ASPP's rates 12 and 24 on 32x32 maps: 44 % and 75 %), so that conv2d_sparse_taps
// pays.
bool sparse_taps_apply(const at::Tensor& x, const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
                       at::IntArrayRef dilation, int64_t groups);

// That conv as nine 1x1 convs, each over only the output pixels whose tap lands inside the map, added
// into place: the same sums (up to rounding order) without the products with padding, which
// oneDNN's direct kernel computes. Differentiable.
at::Tensor conv2d_sparse_taps(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                              at::IntArrayRef dilation);

// at::conv2d, as the centre tap alone where centre_tap_applies (exact, 1/9 of the work, gradients
// only to the centre tap as they should be), or through conv2d_sparse_taps where sparse_taps_apply.
at::Tensor conv2d_fast(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                       at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups);

}  // namespace detseg
