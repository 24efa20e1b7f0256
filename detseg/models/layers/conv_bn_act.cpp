// Implements: conv -> batch norm -> activation, named like torchvision's Conv2dNormActivation.
#include "detseg/models/layers/conv_bn_act.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "detseg/ops/conv2d_fast.h"
#include "detseg/ops/fast_paths.h"
#include "detseg/ops/packed_conv.h"

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

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The folded affine of a frozen (or eval-mode) norm: y = conv(x) * scale + shift.
std::pair<at::Tensor, at::Tensor> folded_affine(const Norm2dImpl& norm) {
  const at::Tensor scale = norm.weight * (norm.running_var + norm.options.eps()).rsqrt();
  return {scale, norm.bias - norm.running_mean * scale};
}

// Every conv here pads dilation * (k - 1) / 2 (make_conv2d, ResNet's 7x7 stem with 3).
std::array<int64_t, 2> same_padding(const torch::nn::Conv2d& conv) {
  const auto& d = *conv->options.dilation();
  return {d[0] * (conv->weight.size(2) - 1) / 2, d[1] * (conv->weight.size(3) - 1) / 2};
}

at::Tensor conv2d_norm_packed(torch::nn::Conv2d& conv, Norm2d& norm, const at::Tensor& x,
                              at::IntArrayRef padding) {
  TORCH_CHECK(norm && (norm->options.frozen() || !norm->is_training()) && !conv->options.bias(),
              "conv2d_norm: the oneDNN inference path needs a bias-free conv and a frozen or eval-mode norm");
  return conv2d_packed(
      x, conv->weight, *conv->options.stride(), padding, *conv->options.dilation(), conv->options.groups(),
      {&conv->weight, &norm->weight, &norm->bias, &norm->running_mean, &norm->running_var},
      [&] {
        const auto [scale, shift] = folded_affine(*norm);
        return std::pair<at::Tensor, at::Tensor>{conv->weight * scale.view({-1, 1, 1, 1}), shift};
      },
      norm->packed_conv);
}

// A trained conv followed by a frozen norm. The forward pass folds the norm's scale into the
// weight (one conv, no extra pass over the activations); the backward pass folds it again rather
// than have autograd keep every folded weight alive between the passes. Why: those copies were a
// second set of the trained convs' weights held through each train step, ~88 MB for ResNet-50's
// layer2-4, which put Faster R-CNN's peak memory level with torchvision's (whose frozen norm scales
// the activations instead) rather than below it.
std::vector<int64_t> as_vector(at::IntArrayRef v) { return v.vec(); }

class FrozenNormConv : public torch::autograd::Function<FrozenNormConv> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& scale,
                            const at::Tensor& shift, std::vector<int64_t> stride, std::vector<int64_t> padding,
                            std::vector<int64_t> dilation, int64_t groups) {
    ctx->save_for_backward({x, weight, scale});
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["dilation"] = dilation;
    ctx->saved_data["groups"] = groups;
    return conv2d_fast(x, weight * scale.view({-1, 1, 1, 1}), shift, stride, padding, dilation, groups);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &scale = saved[2];
    const at::Tensor folded = weight * scale.view({-1, 1, 1, 1});
    const std::array<int64_t, 1> bias_size = {folded.size(0)};
    const std::array<int64_t, 2> no_output_padding = {0, 0};
    // Under autocast the forward's conv ran in bf16/fp16 (its inputs cast by the autocast
    // dispatch), so the incoming gradient is in that precision while x, weight and scale are the
    // fp32 originals; backward runs outside autocast, so the same casts are made here, and each
    // gradient goes back to its input's dtype. No-ops when everything is fp32.
    const auto dt = grads[0].scalar_type();
    const at::Tensor x_dt = x.scalar_type() == dt ? x : x.to(dt);
    const at::Tensor folded_dt = folded.scalar_type() == dt ? folded : folded.to(dt);
    auto [dx, dfolded, dshift] = at::convolution_backward(
        grads[0], x_dt, folded_dt, at::IntArrayRef(bias_size), ctx->saved_data["stride"].toIntVector(),
        ctx->saved_data["padding"].toIntVector(), ctx->saved_data["dilation"].toIntVector(), false,
        at::IntArrayRef(no_output_padding), ctx->saved_data["groups"].toInt(),
        {ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(3)});
    if (dx.defined() && dx.scalar_type() != x.scalar_type()) dx = dx.to(x.scalar_type());
    if (dfolded.defined() && dfolded.scalar_type() != weight.scalar_type()) dfolded = dfolded.to(weight.scalar_type());
    if (dshift.defined() && dshift.scalar_type() != scale.scalar_type()) dshift = dshift.to(scale.scalar_type());
    const at::Tensor dweight = dfolded.defined() ? dfolded * scale.view({-1, 1, 1, 1}) : at::Tensor();
    return {dx, dweight, at::Tensor(), dshift, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor conv2d_norm(torch::nn::Conv2d& conv, Norm2d& norm, const at::Tensor& x) {
  const std::array<int64_t, 2> padding = same_padding(conv);
  if (in_fast_layout(x)) return conv2d_norm_packed(conv, norm, x, padding);
  if (!norm || !norm->options.frozen()) {
    at::Tensor y = conv2d_fast(x, conv->weight, conv->options.bias() ? conv->bias : at::Tensor(),
                               *conv->options.stride(), padding, *conv->options.dilation(), conv->options.groups());
    return norm ? norm->forward(y) : y;
  }
  TORCH_CHECK(!conv->options.bias(), "conv2d_norm: a conv followed by a frozen norm has no bias");
  const auto [scale, shift] = folded_affine(*norm);
  if (at::GradMode::is_enabled() && conv->weight.requires_grad() && !scale.requires_grad() && !shift.requires_grad())
    return FrozenNormConv::apply(x, conv->weight, scale, shift, as_vector(*conv->options.stride()), as_vector(padding),
                                 as_vector(*conv->options.dilation()), conv->options.groups());
  const at::Tensor weight = conv->weight * scale.view({-1, 1, 1, 1});
  return conv2d_fast(x, weight, shift, *conv->options.stride(), padding, *conv->options.dilation(),
                     conv->options.groups());
}

at::Tensor conv2d_any_layout(torch::nn::Conv2d& conv, PackedConvWeights& packed, const at::Tensor& x) {
  if (!in_fast_layout(x))
    return conv2d_fast(x, conv->weight, conv->options.bias() ? conv->bias : at::Tensor(), *conv->options.stride(),
                       same_padding(conv), *conv->options.dilation(), conv->options.groups());
  TORCH_CHECK(conv->options.bias(), "conv2d_any_layout: the blocked-layout path needs a conv with bias");
  return conv2d_packed(x, conv->weight, *conv->options.stride(), same_padding(conv), *conv->options.dilation(),
                       conv->options.groups(), {&conv->weight, &conv->bias},
                       [&] { return std::pair<at::Tensor, at::Tensor>{conv->weight, conv->bias}; }, packed);
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
  at::Tensor y = norm ? conv2d_norm(conv, norm, x) : conv2d_any_layout(conv, packed_conv, x);
  return apply_activation_(y, options.activation());
}

}  // namespace detseg
