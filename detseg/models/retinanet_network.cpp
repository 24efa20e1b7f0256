// Implements: RetinaNet's network (ResNet + FPN P3-P7 + RetinaNet head), torchvision layout.
#include "detseg/models/retinanet_network.h"

#include <ATen/ATen.h>

#include "detseg/models/registry.h"

namespace detseg {

namespace {
std::vector<int64_t> channels_of(const ResNet& body) {
  std::vector<int64_t> out;
  for (const auto& spec : body->feature_specs()) out.push_back(spec.channels);
  return out;
}
}  // namespace

ResNetFpnImpl::ResNetFpnImpl(const RetinaNetNetworkOptions& options) {
  body = register_module("body", ResNet(ResNetOptions(options.depth())
                                            .frozen_bn(options.frozen_bn())
                                            .frozen_stages(options.frozen_stages())
                                            .returned_layers({2, 3, 4})));
  NeckOptions neck;
  neck.in_channels = channels_of(body);
  neck.width = options.fpn_channels();
  neck.repeats = options.neck_repeats();
  neck.p6_from_p5 = options.p6_from_p5();
  neck.bn_momentum = options.bn_momentum();
  fpn = register_module("fpn", build_neck(options.neck(), neck));
}

ResNetFpnImpl::ResNetFpnImpl(const ResNetOptions& body_options, FpnOptions fpn_options) {
  body = register_module("body", ResNet(body_options));
  fpn = register_module("fpn", Fpn(fpn_options.in_channels(channels_of(body))).ptr());
}

std::vector<at::Tensor> ResNetFpnImpl::forward(const at::Tensor& images) {
  return fpn->forward(body->forward(images));
}

RetinaNetNetworkImpl::RetinaNetNetworkImpl(const RetinaNetNetworkOptions& options_)
    : options(options_) {
  backbone = register_module("backbone", ResNetFpn(options));
  DenseHeadOptions h;
  h.in_channels = options.fpn_channels();
  h.num_anchors = options.num_anchors();
  h.num_classes = options.num_classes();
  h.depth = options.head_depth();
  h.prior_probability = options.prior_probability();
  h.group_norm_groups = options.head_group_norm_groups();
  h.bn_momentum = options.bn_momentum();
  head = register_module("head", build_dense_head(options.head(), h));
}

DenseOutputs RetinaNetNetworkImpl::forward(const at::Tensor& images) {
  return head->predict(backbone->forward(images));
}

}  // namespace detseg
