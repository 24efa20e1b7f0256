// Implements: ASPP and the DeepLabv3+ decoder.
#include "detseg/models/heads/deeplab_head.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>

#include "detseg/core/error.h"

namespace detseg {

std::vector<int64_t> aspp_rates_for_output_stride(int64_t output_stride) {
  DETSEG_CONFIG_CHECK(output_stride == 8 || output_stride == 16 || output_stride == 32,
                      "DeepLab: output_stride must be 8, 16 or 32, got ", output_stride);
  const int64_t f = 16 / output_stride;  // 2, 1, 0 (32: halve)
  if (f == 0) return {3, 6, 9};
  return {6 * f, 12 * f, 18 * f};
}

AsppPoolingImpl::AsppPoolingImpl(int64_t in, int64_t out) {
  conv = register_module("1", make_conv2d(in, out, 1, 1, false));
  norm = register_module("2", Norm2d(Norm2dOptions(out)));
}

at::Tensor AsppPoolingImpl::forward(const at::Tensor& x) {
  at::Tensor y = conv2d_norm(conv, norm, global_average_pool(x)).relu_();
  // Bilinear resize of a 1x1 map is a broadcast, with or without aligned corners.
  return y.expand({-1, -1, x.size(2), x.size(3)});
}

AsppImpl::AsppImpl(const AsppOptions& options_) : options(options_) {
  const int64_t in = options.in(), c = options.channels();
  torch::nn::ModuleList convs;
  branches.push_back(ConvBnAct(ConvBnActOptions(in, c, 1)));
  convs->push_back(branches.back());
  for (int64_t rate : options.rates()) {
    branches.push_back(ConvBnAct(ConvBnActOptions(in, c, 3).dilation(rate)));
    convs->push_back(branches.back());
  }
  if (options.image_pooling()) {
    pooling = AsppPooling(in, c);
    convs->push_back(pooling);
  }
  register_module("convs", convs);
  const int64_t parts = static_cast<int64_t>(branches.size()) + (pooling ? 1 : 0);
  project = ConvBnAct(ConvBnActOptions(parts * c, c, 1));
  // torchvision's project is Sequential(conv, norm, ReLU, Dropout): ConvBnAct's "0"/"1" children
  // registered under "project" give the same names.
  register_module("project", project);
}

at::Tensor AsppImpl::forward(const at::Tensor& x_in) {
  // The branches are one run of convs on the same input (ops/fast_paths.h: at inference the input
  // is reordered once, not around each branch); concatenation needs the plain layout.
  const at::Tensor x = to_fast_layout(x_in, is_training());
  std::vector<at::Tensor> outs;
  outs.reserve(branches.size() + 1);
  for (auto& branch : branches) outs.push_back(to_plain_layout(branch->forward(x)));
  if (pooling) outs.push_back(pooling->forward(x));
  at::Tensor y = to_plain_layout(project->forward(to_fast_layout(at::cat(outs, 1), is_training())));
  return options.dropout() > 0 && is_training() ? at::dropout(y, options.dropout(), true) : y;
}

DeepLabDecoderImpl::DeepLabDecoderImpl(const DeepLabDecoderOptions& options_) : options(options_) {
  project = register_module("project", ConvBnAct(ConvBnActOptions(options.low_level_in(), options.low_level_channels(), 1)));
  torch::nn::Sequential fuse;
  fuse0 = ConvBnAct(ConvBnActOptions(options.aspp_channels() + options.low_level_channels(), options.channels(), 3));
  fuse1 = ConvBnAct(ConvBnActOptions(options.channels(), options.channels(), 3));
  fuse->push_back(fuse0);
  fuse->push_back(fuse1);
  register_module("fuse", fuse);
}

at::Tensor DeepLabDecoderImpl::forward(const at::Tensor& aspp_out, const at::Tensor& low_level) {
  // Upsampling and concatenation run in the plain layout, the convs around them in the fast one.
  at::Tensor low = to_plain_layout(project->forward(to_fast_layout(low_level, is_training())));
  at::Tensor up = at::upsample_bilinear2d(aspp_out, {low.size(2), low.size(3)}, /*align_corners=*/true);
  at::Tensor fused = at::cat({up, low}, 1);
  return to_plain_layout(fuse1->forward(fuse0->forward(to_fast_layout(fused, is_training()))));
}

}  // namespace detseg
