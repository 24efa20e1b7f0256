// Implements: EfficientDet D0-D7 networks (EfficientNet backbone + BiFPN + class/box nets) scaled
// per the EfficientDet paper's table. The neck and the head are model.neck's and model.head's
// parts (config/parts.def): BiFPN and EfficientDet's nets unless the config names others, at the
// size's width and depths. Losses, anchors and postprocessing live elsewhere.
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "detseg/config/efficientdet_sizes.h"
#include "detseg/models/backbones/efficientnet.h"
#include "detseg/models/dense_outputs.h"
#include "detseg/models/heads/dense_head.h"
#include "detseg/models/necks/neck.h"

namespace detseg {

struct EfficientDetNetworkOptions {
  explicit EfficientDetNetworkOptions(int64_t compound_coef = 0, int64_t num_classes = 90)
      : compound_coef_(compound_coef), num_classes_(num_classes) {}
  TORCH_ARG(int64_t, compound_coef);  // D0..D7
  TORCH_ARG(int64_t, num_classes);    // reference default: 90 (COCO)
  TORCH_ARG(int64_t, num_anchors) = 9;
  TORCH_ARG(double, drop_connect_rate) = 0.2;  // backbone
  TORCH_ARG(double, prior_probability) = 0.01;
  TORCH_ARG(double, bn_eps) = 1e-3;            // the reference's TF default, everywhere
  TORCH_ARG(double, bn_momentum) = 0.01;
  TORCH_ARG(std::string, neck) = "bifpn";         // a DETSEG_NECK line
  TORCH_ARG(std::string, head) = "efficientdet";  // a DETSEG_DENSE_HEAD line
  TORCH_ARG(int64_t, head_group_norm_groups) = 0;  // the retinanet head's GroupNorm
};

class EfficientDetNetworkImpl : public torch::nn::Module {
 public:
  explicit EfficientDetNetworkImpl(const EfficientDetNetworkOptions& options);
  DenseOutputs forward(const at::Tensor& images);  // images: [N, 3, H, W] normalised

  EfficientDetNetworkOptions options;
  EfficientDetScaling scaling;
  EfficientNet backbone{nullptr};
  std::shared_ptr<NeckImpl> fpn;
  // Its children (class_net and box_net for EfficientDet's) are registered on the network itself,
  // the reference's layout.
  std::shared_ptr<DenseHeadImpl> head;
};
TORCH_MODULE(EfficientDetNetwork);

}  // namespace detseg
