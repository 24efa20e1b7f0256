// Implements: RetinaNet's network (ResNet + FPN P3-P7 + RetinaNet head), laid out like torchvision's
// retinanet_resnet50_fpn so its state dict loads key for key (backbone.body.*, backbone.fpn.*,
// head.*). The neck and the head are model.neck's and model.head's parts (config/parts.def): FPN
// and RetinaNet's subnets unless the config names others. Losses, anchors and postprocessing live
// elsewhere.
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "detseg/models/backbones/resnet.h"
#include "detseg/models/dense_outputs.h"
#include "detseg/models/heads/dense_head.h"
#include "detseg/models/necks/fpn.h"
#include "detseg/models/necks/neck.h"

namespace detseg {

struct RetinaNetNetworkOptions {
  explicit RetinaNetNetworkOptions(int64_t num_classes = 91) : num_classes_(num_classes) {}
  TORCH_ARG(int64_t, num_classes);        // torchvision COCO: 91
  TORCH_ARG(int64_t, depth) = 50;         // ResNet-18/34/50/101
  TORCH_ARG(bool, frozen_bn) = true;
  TORCH_ARG(int64_t, frozen_stages) = 2;  // torchvision trainable_backbone_layers = 5 - this
  TORCH_ARG(int64_t, fpn_channels) = 256;
  TORCH_ARG(int64_t, num_anchors) = 9;    // 3 scales x 3 aspect ratios
  TORCH_ARG(bool, p6_from_p5) = true;     // false: torchvision's retinanet_resnet50_fpn_v2 style
  TORCH_ARG(double, prior_probability) = 0.01;
  TORCH_ARG(int64_t, head_group_norm_groups) = 0;  // >0: GroupNorm in the head convs (torchvision v2: 32)
  TORCH_ARG(std::string, neck) = "fpn";             // a DETSEG_NECK line
  TORCH_ARG(std::string, head) = "retinanet";       // a DETSEG_DENSE_HEAD line
  TORCH_ARG(int64_t, neck_repeats) = 3;             // bifpn: cells (EfficientDet-D0's 3)
  TORCH_ARG(int64_t, head_depth) = 4;               // conv layers per subnet
  TORCH_ARG(double, bn_momentum) = 0.01;            // necks and heads with batch norm
};

// torchvision's BackboneWithFPN: children "body" (ResNet) and "fpn" (the neck, any DETSEG_NECK).
class ResNetFpnImpl : public torch::nn::Module {
 public:
  explicit ResNetFpnImpl(const RetinaNetNetworkOptions& options);
  // Any ResNet and FPN; fpn.in_channels is taken from the body's returned layers.
  ResNetFpnImpl(const ResNetOptions& body_options, FpnOptions fpn_options);
  std::vector<at::Tensor> forward(const at::Tensor& images);  // -> P3..P7 (RetinaNet)

  ResNet body{nullptr};
  std::shared_ptr<NeckImpl> fpn;
};
TORCH_MODULE(ResNetFpn);

class RetinaNetNetworkImpl : public torch::nn::Module {
 public:
  explicit RetinaNetNetworkImpl(const RetinaNetNetworkOptions& options);
  // images: [N, 3, H, W] normalised.
  DenseOutputs forward(const at::Tensor& images);

  RetinaNetNetworkOptions options;
  ResNetFpn backbone{nullptr};
  std::shared_ptr<DenseHeadImpl> head;
};
TORCH_MODULE(RetinaNetNetwork);

}  // namespace detseg
