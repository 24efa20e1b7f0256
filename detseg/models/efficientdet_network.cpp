// Implements: EfficientDet D0-D7 networks scaled per the paper's table.
#include "detseg/models/efficientdet_network.h"

#include <ATen/ATen.h>

#include "detseg/models/dense_outputs.h"
#include "detseg/models/registry.h"

namespace detseg {

EfficientDetNetworkImpl::EfficientDetNetworkImpl(const EfficientDetNetworkOptions& options_)
    : options(options_), scaling(efficientdet_scaling(options_.compound_coef())) {
  backbone = register_module("backbone", EfficientNet(EfficientNetOptions(scaling.backbone)
                                                          .bn_eps(options.bn_eps())
                                                          .bn_momentum(options.bn_momentum())
                                                          .drop_connect_rate(options.drop_connect_rate())
                                                          .returned_stages({3, 5, 7})));
  NeckOptions neck;
  for (const auto& spec : backbone->feature_specs()) neck.in_channels.push_back(spec.channels);
  neck.width = scaling.bifpn_width;
  neck.repeats = scaling.bifpn_depth;
  neck.bn_eps = options.bn_eps();
  neck.bn_momentum = options.bn_momentum();
  fpn = register_module("fpn", build_neck(options.neck(), neck));
  DenseHeadOptions h;
  h.in_channels = scaling.bifpn_width;
  h.num_anchors = options.num_anchors();
  h.num_classes = options.num_classes();
  h.depth = scaling.head_depth;
  h.prior_probability = options.prior_probability();
  h.group_norm_groups = options.head_group_norm_groups();
  h.bn_eps = options.bn_eps();
  h.bn_momentum = options.bn_momentum();
  head = build_dense_head(options.head(), h);
  for (auto& child : head->named_children()) register_module(child.key(), child.value());
}

DenseOutputs EfficientDetNetworkImpl::forward(const at::Tensor& images) {
  return head->predict(fpn->forward(backbone->forward(images)));
}

}  // namespace detseg
