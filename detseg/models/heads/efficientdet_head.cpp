// Implements: EfficientDet's class and box nets.
#include "detseg/models/heads/efficientdet_head.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cmath>

#include "detseg/models/heads/retinanet_head.h"

namespace detseg {

EfficientDetSubnetImpl::EfficientDetSubnetImpl(const EfficientDetHeadOptions& options,
                                               int64_t outputs_per_anchor_, double bias_init)
    : outputs_per_anchor(outputs_per_anchor_) {
  const int64_t w = options.width();
  torch::nn::ModuleList conv_list, bn_list;
  for (int64_t i = 0; i < options.depth(); ++i) {
    convs.emplace_back(SeparableConvOptions(w, w).norm(false));
    conv_list->push_back(convs.back());
    torch::nn::ModuleList per_level;
    std::vector<Norm2d> level_bns;
    for (int64_t l = 0; l < options.num_levels(); ++l) {
      level_bns.emplace_back(Norm2dOptions(w).eps(options.eps()).momentum(options.momentum()));
      per_level->push_back(level_bns.back());
    }
    bn_list->push_back(per_level);
    bns.push_back(std::move(level_bns));
  }
  register_module("convs", conv_list);
  register_module("bns", bn_list);
  predict = register_module(
      "predict", SeparableConv(SeparableConvOptions(w, options.num_anchors() * outputs_per_anchor).norm(false)));
  // Small normal init for the depthwise/pointwise weights, as the reference's heads.
  for (auto& p : named_parameters(true)) {
    if (p.value().dim() == 4) torch::nn::init::normal_(p.value(), 0.0, 0.01);
  }
  for (auto& conv : convs) torch::nn::init::zeros_(conv->conv_pw->bias);
  torch::nn::init::constant_(predict->conv_pw->bias, bias_init);
}

at::Tensor EfficientDetSubnetImpl::forward(const std::vector<at::Tensor>& features) {
  TORCH_CHECK(features.size() <= (bns.empty() ? features.size() : bns[0].size()),
              "EfficientDet head: built for ", bns.empty() ? 0 : bns[0].size(), " levels, got ",
              features.size());
  std::vector<at::Tensor> outs;
  outs.reserve(features.size());
  for (size_t l = 0; l < features.size(); ++l) {
    at::Tensor x = features[l];
    for (size_t i = 0; i < convs.size(); ++i) {
      x = bns[i][l]->forward(convs[i]->forward(x));
      x = at::silu_(x);
    }
    outs.push_back(flatten_dense_prediction(predict->forward(x), outputs_per_anchor));
  }
  return at::cat(outs, 1);
}

EfficientDetSubnet make_efficientdet_class_net(const EfficientDetHeadOptions& options) {
  const double p = options.prior_probability();
  TORCH_CHECK(p > 0 && p < 1, "EfficientDet head: prior_probability must be in (0, 1), got ", p);
  return EfficientDetSubnet(options, options.num_classes(), -std::log((1 - p) / p));
}

EfficientDetSubnet make_efficientdet_box_net(const EfficientDetHeadOptions& options) {
  return EfficientDetSubnet(options, 4, 0.0);
}


EfficientDetHeadImpl::EfficientDetHeadImpl(const EfficientDetHeadOptions& options) {
  class_net = register_module("class_net", make_efficientdet_class_net(options));
  box_net = register_module("box_net", make_efficientdet_box_net(options));
}

DenseHeadOutputs EfficientDetHeadImpl::forward(const std::vector<at::Tensor>& pyramid) {
  return {class_net->forward(pyramid), box_net->forward(pyramid)};
}

std::shared_ptr<DenseHeadImpl> make_efficientdet_head(const DenseHeadOptions& o) {
  return std::make_shared<EfficientDetHeadImpl>(EfficientDetHeadOptions(o.in_channels, o.depth, o.num_anchors,
                                                                        o.num_classes)
                                                    .num_levels(o.num_levels)
                                                    .prior_probability(o.prior_probability)
                                                    .eps(o.bn_eps)
                                                    .momentum(o.bn_momentum));
}

}  // namespace detseg
