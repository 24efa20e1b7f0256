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
  // A blocked (oneDNN) x has no mean kernel; its average pooling is one, and the 1x1 map is tiny.
  const at::Tensor pooled = x.is_mkldnn() ? at::adaptive_avg_pool2d(x, {1, 1}).to_dense() : x.mean({2, 3}, true);
  at::Tensor y = conv2d_norm(conv, norm, pooled).relu_();
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
  // Inference runs the convs in oneDNN's blocked layout with folded, cached weights (as ResNet's
  // body): the input is reordered once instead of around each branch. Concatenation has no blocked
  // kernel, so the branch outputs come back to the plain layout for it. The result is plain.
  const bool blocked = x_in.is_mkldnn() || mkldnn_inference_enabled(x_in, is_training());
  const at::Tensor x = blocked && !x_in.is_mkldnn() ? x_in.to_mkldnn() : x_in;
  std::vector<at::Tensor> outs;
  outs.reserve(branches.size() + 1);
  for (auto& branch : branches) outs.push_back(blocked ? branch->forward(x).to_dense() : branch->forward(x));
  if (pooling) outs.push_back(pooling->forward(x));
  at::Tensor y = at::cat(outs, 1);
  if (blocked) return project->forward(y.to_mkldnn()).to_dense();  // dropout: identity at inference
  y = project->forward(y);
  return options.dropout() > 0 ? at::dropout(y, options.dropout(), is_training()) : y;
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
  // Inference: the convs in oneDNN's blocked layout (see Aspp); upsampling and concatenation, which
  // have no blocked kernels, in the plain one.
  const bool blocked = mkldnn_inference_enabled(low_level, is_training());
  at::Tensor low = blocked ? project->forward(low_level.to_mkldnn()).to_dense() : project->forward(low_level);
  at::Tensor up = at::upsample_bilinear2d(aspp_out, {low.size(2), low.size(3)}, /*align_corners=*/true);
  at::Tensor fused = at::cat({up, low}, 1);
  if (blocked) return fuse1->forward(fuse0->forward(fused.to_mkldnn())).to_dense();
  return fuse1->forward(fuse0->forward(fused));
}

}  // namespace detseg
