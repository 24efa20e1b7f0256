// Implements: RetinaNet's network (ResNet + FPN P3-P7 + RetinaNet head), laid out like torchvision's
// retinanet_resnet50_fpn so its state dict loads key for key (backbone.body.*, backbone.fpn.*,
// head.*). Losses, anchors and postprocessing live elsewhere.
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "detseg/models/backbones/resnet.h"
#include "detseg/models/dense_outputs.h"
#include "detseg/models/heads/retinanet_head.h"
#include "detseg/models/necks/fpn.h"

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
};

// torchvision's BackboneWithFPN: children "body" (ResNet) and "fpn".
class ResNetFpnImpl : public torch::nn::Module {
 public:
  explicit ResNetFpnImpl(const RetinaNetNetworkOptions& options);
  // Any ResNet and FPN; fpn.in_channels is taken from the body's returned layers.
  ResNetFpnImpl(const ResNetOptions& body_options, FpnOptions fpn_options);
  std::vector<at::Tensor> forward(const at::Tensor& images);  // -> P3..P7 (RetinaNet)

  ResNet body{nullptr};
  Fpn fpn{nullptr};
};
TORCH_MODULE(ResNetFpn);

class RetinaNetNetworkImpl : public torch::nn::Module {
 public:
  explicit RetinaNetNetworkImpl(const RetinaNetNetworkOptions& options);
  // images: [N, 3, H, W] normalised.
  DenseOutputs forward(const at::Tensor& images);

  RetinaNetNetworkOptions options;
  ResNetFpn backbone{nullptr};
  RetinaNetHead head{nullptr};
};
TORCH_MODULE(RetinaNetNetwork);

}  // namespace detseg
