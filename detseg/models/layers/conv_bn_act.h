// Implements: conv -> batch norm -> activation, named like torchvision's Conv2dNormActivation
// (children "0" conv and "1" norm, so keys read "<name>.0.weight", "<name>.1.running_mean").
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include "detseg/models/layers/frozen_batch_norm.h"
#include "detseg/ops/fast_paths.h"
#include "detseg/ops/packed_conv.h"

namespace detseg {

enum class Activation { kNone, kReLU, kSiLU, kSigmoid, kReLU6 };

// Applies the activation (swish is SiLU).
at::Tensor apply_activation(const at::Tensor& x, Activation act);
// The in-place variant for intermediate results that nothing else holds.
at::Tensor apply_activation_(at::Tensor& x, Activation act);

struct ConvBnActOptions {
  ConvBnActOptions(int64_t in, int64_t out, int64_t kernel) : in_(in), out_(out), kernel_(kernel) {}
  TORCH_ARG(int64_t, in);
  TORCH_ARG(int64_t, out);
  TORCH_ARG(int64_t, kernel);
  TORCH_ARG(int64_t, stride) = 1;
  TORCH_ARG(int64_t, groups) = 1;
  TORCH_ARG(int64_t, dilation) = 1;      // padding dilation * (kernel - 1) / 2
  TORCH_ARG(bool, norm) = true;          // false: conv with bias, no "1" child
  TORCH_ARG(bool, frozen_norm) = false;
  TORCH_ARG(double, eps) = 1e-5;
  TORCH_ARG(double, momentum) = 0.1;
  TORCH_ARG(Activation, activation) = Activation::kReLU;
};

class ConvBnActImpl : public torch::nn::Module {
 public:
  explicit ConvBnActImpl(const ConvBnActOptions& options);
  at::Tensor forward(const at::Tensor& x);  // x: [N, in, H, W] -> [N, out, H/stride, W/stride]

  ConvBnActOptions options;
  torch::nn::Conv2d conv{nullptr};
  Norm2d norm{nullptr};  // null when options.norm() is false
  PackedConvWeights packed_conv;  // without a norm: the conv's weights for the fast layout (inference only)
};
TORCH_MODULE(ConvBnAct);

// norm(conv(x)). With a frozen norm the affine is folded into the conv (weight * scale, bias =
// shift), so training and inference skip a separate pass over the activations, forward and
// backward; gradients still reach conv.weight through the fold, which the backward pass recomputes
// rather than keeping a folded copy of every trained weight alive. Same values up to rounding.
// Assumes "same" padding dilation * (k - 1) / 2, as make_conv2d builds.
// An x in the fast layout (in_fast_layout, inference only, see to_fast_layout) gives a result in
// that layout, computed with the folded weights packed once into `norm->packed_conv` (the norm must
// be frozen or in eval mode; ops/packed_conv.h).
at::Tensor conv2d_norm(torch::nn::Conv2d& conv, Norm2d& norm, const at::Tensor& x);

// conv(x) in either layout, for a conv with "same" padding: a plain x through conv2d_fast, an x in
// the fast layout through weights packed once into `packed` (the conv must have a bias).
at::Tensor conv2d_any_layout(torch::nn::Conv2d& conv, PackedConvWeights& packed, const at::Tensor& x);


// Plain conv with torchvision-style "same" padding dilation * (k - 1) / 2.
torch::nn::Conv2d make_conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1,
                              bool bias = true, int64_t groups = 1, int64_t dilation = 1);

}  // namespace detseg
