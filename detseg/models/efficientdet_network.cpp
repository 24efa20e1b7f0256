// Implements: EfficientDet D0-D7 networks scaled per the paper's table.
#include "detseg/models/efficientdet_network.h"

#include <ATen/ATen.h>

#include "detseg/core/error.h"
#include "detseg/models/dense_outputs.h"

namespace detseg {

EfficientDetScaling efficientdet_scaling(int64_t compound_coef) {
  // Paper Table 1: resolution, backbone, BiFPN width/depth, box/class depth.
  static const EfficientDetScaling table[8] = {
      {512, 0, 64, 3, 3},   {640, 1, 88, 4, 3},   {768, 2, 112, 5, 3},  {896, 3, 160, 6, 4},
      {1024, 4, 224, 7, 4}, {1280, 5, 288, 7, 4}, {1280, 6, 384, 8, 5}, {1536, 6, 384, 8, 5}};
  DETSEG_CONFIG_CHECK(compound_coef >= 0 && compound_coef <= 7,
                      "EfficientDet: compound coefficient must be 0..7 (D0..D7), got ", compound_coef);
  return table[compound_coef];
}

EfficientDetNetworkImpl::EfficientDetNetworkImpl(const EfficientDetNetworkOptions& options_)
    : options(options_), scaling(efficientdet_scaling(options_.compound_coef())) {
  backbone = register_module("backbone", EfficientNet(EfficientNetOptions(scaling.backbone)
                                                          .bn_eps(options.bn_eps())
                                                          .bn_momentum(options.bn_momentum())
                                                          .drop_connect_rate(options.drop_connect_rate())
                                                          .returned_stages({3, 5, 7})));
  std::vector<int64_t> in_channels;
  for (const auto& spec : backbone->feature_specs()) in_channels.push_back(spec.channels);
  fpn = register_module("fpn", BiFpn(BiFpnOptions(in_channels, scaling.bifpn_width, scaling.bifpn_depth)
                                         .eps(options.bn_eps())
                                         .momentum(options.bn_momentum())));
  const auto head_options = EfficientDetHeadOptions(scaling.bifpn_width, scaling.head_depth,
                                                    options.num_anchors(), options.num_classes())
                                .prior_probability(options.prior_probability())
                                .eps(options.bn_eps())
                                .momentum(options.bn_momentum());
  class_net = register_module("class_net", make_efficientdet_class_net(head_options));
  box_net = register_module("box_net", make_efficientdet_box_net(head_options));
}

DenseOutputs EfficientDetNetworkImpl::forward(const at::Tensor& images) {
  const std::vector<at::Tensor> pyramid = fpn->forward(backbone->forward(images));
  DenseOutputs out;
  out.cls_logits = class_net->forward(pyramid);
  out.box_regression = box_net->forward(pyramid);
  set_level_geometry(out, pyramid, /*min_level=*/3);
  return out;
}

}  // namespace detseg
