// Implements: RetinaNet's class and box subnets (torchvision 0.14 layout).
#include "detseg/models/heads/retinanet_head.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cmath>


namespace detseg {

at::Tensor flatten_dense_prediction(const at::Tensor& x, int64_t outputs_per_anchor) {
  const int64_t n = x.size(0), h = x.size(2), w = x.size(3);
  // [N, A, D, H, W] -> [N, H, W, A, D] -> [N, HWA, D]
  return x.view({n, -1, outputs_per_anchor, h, w}).permute({0, 3, 4, 1, 2}).reshape({n, -1, outputs_per_anchor});
}

RetinaNetSubnetImpl::RetinaNetSubnetImpl(const RetinaNetHeadOptions& options,
                                         int64_t outputs_per_anchor_,
                                         const std::string& predictor_name, double bias_init)
    : outputs_per_anchor(outputs_per_anchor_) {
  const int64_t c = options.in_channels();
  torch::nn::ModuleList conv_list;
  for (int64_t i = 0; i < options.num_convs(); ++i) {
    convs.emplace_back(ConvBnActOptions(c, c, 3).norm(false).activation(Activation::kReLU));
    conv_list->push_back(convs.back());
    torch::nn::init::normal_(convs.back()->conv->weight, 0.0, 0.01);
    torch::nn::init::zeros_(convs.back()->conv->bias);
    if (options.group_norm_groups() > 0) {
      TORCH_CHECK(c % options.group_norm_groups() == 0, "RetinaNetHead: ", c, " channels do not split into ",
                  options.group_norm_groups(), " groups");
      // Registered inside conv.i as child "1", torchvision's Conv2dNormActivation layout.
      group_norms.push_back(convs.back()->register_module(
          "1", torch::nn::GroupNorm(torch::nn::GroupNormOptions(options.group_norm_groups(), c))));
    }
  }
  register_module("conv", conv_list);
  predictor = register_module(predictor_name,
                              make_conv2d(c, options.num_anchors() * outputs_per_anchor, 3));
  torch::nn::init::normal_(predictor->weight, 0.0, 0.01);
  torch::nn::init::constant_(predictor->bias, bias_init);
}

at::Tensor RetinaNetSubnetImpl::forward(const std::vector<at::Tensor>& features) {
  std::vector<at::Tensor> outs;
  outs.reserve(features.size());
  for (const at::Tensor& f : features) {
    // Each level is one run of convs (shared across levels); GroupNorm has no blocked kernel, so a
    // GroupNorm head stays in the plain layout.
    at::Tensor x = group_norms.empty() ? to_fast_layout(f, is_training()) : f;
    for (size_t i = 0; i < convs.size(); ++i) {
      if (group_norms.empty()) {
        x = convs[i]->forward(x);
      } else {
        x = group_norms[i]->forward(group_norm_input(convs[i]->conv->forward(x)));
        apply_activation_(x, convs[i]->options.activation());
      }
    }
    x = to_plain_layout(conv2d_any_layout(predictor, packed_predictor, x));
    outs.push_back(flatten_dense_prediction(x, outputs_per_anchor));
  }
  return at::cat(outs, 1);
}

RetinaNetHeadImpl::RetinaNetHeadImpl(const RetinaNetHeadOptions& options_) : options(options_) {
  TORCH_CHECK(options.prior_probability() > 0 && options.prior_probability() < 1,
              "RetinaNetHead: prior_probability must be in (0, 1), got ", options.prior_probability());
  const double p = options.prior_probability();
  classification_head = register_module(
      "classification_head",
      RetinaNetSubnet(options, options.num_classes(), "cls_logits", -std::log((1 - p) / p)));
  regression_head =
      register_module("regression_head", RetinaNetSubnet(options, 4, "bbox_reg", 0.0));
}


DenseHeadOutputs RetinaNetHeadImpl::forward(const std::vector<at::Tensor>& pyramid) {
  return {classification_head->forward(pyramid), regression_head->forward(pyramid)};
}

std::shared_ptr<DenseHeadImpl> make_retinanet_head(const DenseHeadOptions& o) {
  return std::make_shared<RetinaNetHeadImpl>(RetinaNetHeadOptions(o.in_channels, o.num_anchors, o.num_classes)
                                                 .num_convs(o.depth)
                                                 .prior_probability(o.prior_probability)
                                                 .group_norm_groups(o.group_norm_groups));
}

}  // namespace detseg
