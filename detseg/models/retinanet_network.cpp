// Implements: RetinaNet's network (ResNet + FPN P3-P7 + RetinaNet head), torchvision layout.
#include "detseg/models/retinanet_network.h"

#include <ATen/ATen.h>

namespace detseg {

ResNetFpnImpl::ResNetFpnImpl(const RetinaNetNetworkOptions& options)
    : ResNetFpnImpl(ResNetOptions(options.depth())
                        .frozen_bn(options.frozen_bn())
                        .frozen_stages(options.frozen_stages())
                        .returned_layers({2, 3, 4}),
                    FpnOptions({}, options.fpn_channels()).extra_p6p7(true).p6_from_p5(options.p6_from_p5())) {}

ResNetFpnImpl::ResNetFpnImpl(const ResNetOptions& body_options, FpnOptions fpn_options) {
  body = register_module("body", ResNet(body_options));
  std::vector<int64_t> in_channels;
  for (const auto& spec : body->feature_specs()) in_channels.push_back(spec.channels);
  fpn = register_module("fpn", Fpn(fpn_options.in_channels(in_channels)));
}

std::vector<at::Tensor> ResNetFpnImpl::forward(const at::Tensor& images) {
  return fpn->forward(body->forward(images));
}

RetinaNetNetworkImpl::RetinaNetNetworkImpl(const RetinaNetNetworkOptions& options_)
    : options(options_) {
  backbone = register_module("backbone", ResNetFpn(options));
  head = register_module(
      "head", RetinaNetHead(RetinaNetHeadOptions(options.fpn_channels(), options.num_anchors(),
                                                 options.num_classes())
                                .prior_probability(options.prior_probability())
                                .group_norm_groups(options.head_group_norm_groups())));
}

DenseOutputs RetinaNetNetworkImpl::forward(const at::Tensor& images) {
  const std::vector<at::Tensor> pyramid = backbone->forward(images);
  DenseOutputs out;
  out.cls_logits = head->classification_head->forward(pyramid);
  out.box_regression = head->regression_head->forward(pyramid);
  set_level_geometry(out, pyramid, /*min_level=*/3);
  return out;
}

}  // namespace detseg
