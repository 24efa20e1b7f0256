// Implements: conv -> batch norm -> activation, named like torchvision's Conv2dNormActivation.
#include "detseg/models/layers/conv_bn_act.h"

#include <ATen/ATen.h>

namespace detseg {

at::Tensor apply_activation(const at::Tensor& x, Activation act) {
  switch (act) {
    case Activation::kNone: return x;
    case Activation::kReLU: return at::relu(x);
    case Activation::kReLU6: return at::hardtanh(x, 0.0, 6.0);
    case Activation::kSiLU: return at::silu(x);
    case Activation::kSigmoid: return at::sigmoid(x);
  }
  return x;
}

at::Tensor apply_activation_(at::Tensor& x, Activation act) {
  switch (act) {
    case Activation::kNone: return x;
    case Activation::kReLU: return at::relu_(x);
    case Activation::kReLU6: return at::hardtanh_(x, 0.0, 6.0);
    case Activation::kSiLU: return at::silu_(x);
    case Activation::kSigmoid: return at::sigmoid_(x);
  }
  return x;
}

torch::nn::Conv2d make_conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride, bool bias,
                              int64_t groups, int64_t dilation) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel)
                               .stride(stride)
                               .padding(dilation * (kernel - 1) / 2)
                               .dilation(dilation)
                               .groups(groups)
                               .bias(bias));
}

at::Tensor conv2d_norm(torch::nn::Conv2d& conv, Norm2d& norm, const at::Tensor& x) {
  if (!norm || !norm->options.frozen()) {
    at::Tensor y = conv->forward(x);
    return norm ? norm->forward(y) : y;
  }
  TORCH_CHECK(!conv->options.bias(), "conv2d_norm: a conv followed by a frozen norm has no bias");
  // Every conv here pads dilation * (k - 1) / 2 (make_conv2d, ResNet's 7x7 stem with 3).
  const auto& d = *conv->options.dilation();
  const std::array<int64_t, 2> padding = {d[0] * (conv->weight.size(2) - 1) / 2, d[1] * (conv->weight.size(3) - 1) / 2};
  const at::Tensor scale = norm->weight * (norm->running_var + norm->options.eps()).rsqrt();
  const at::Tensor shift = norm->bias - norm->running_mean * scale;
  const at::Tensor weight = conv->weight * scale.view({-1, 1, 1, 1});
  return at::conv2d(x, weight, shift, *conv->options.stride(), padding,
                    *conv->options.dilation(), conv->options.groups());
}

ConvBnActImpl::ConvBnActImpl(const ConvBnActOptions& options_) : options(options_) {
  conv = register_module("0", make_conv2d(options.in(), options.out(), options.kernel(),
                                          options.stride(), !options.norm(), options.groups(),
                                          options.dilation()));
  if (options.norm()) {
    norm = register_module("1", Norm2d(Norm2dOptions(options.out())
                                           .eps(options.eps())
                                           .momentum(options.momentum())
                                           .frozen(options.frozen_norm())));
  }
}

at::Tensor ConvBnActImpl::forward(const at::Tensor& x) {
  at::Tensor y = conv2d_norm(conv, norm, x);
  return apply_activation_(y, options.activation());
}

}  // namespace detseg
