// Implements: the networks of Faster R-CNN and Mask R-CNN with a ResNet + FPN feature extractor,
// laid out like torchvision's fasterrcnn_resnet50_fpn / maskrcnn_resnet50_fpn so their state dicts
// load key for key, or with the reference's ResNet C4 feature extractor (layer3 first stage, layer4
// second stage: torchvision's resnet split, backbone.body.*) and detectron2's C4 mask head. FPN
// keys: backbone.body.* (ResNet), backbone.fpn.* (P2-P5 + max-pooled P6),
// rpn.head.{conv.0.0, cls_logits, bbox_pred}.*, roi_heads.box_head.{fc6, fc7}.*,
// roi_heads.box_predictor.{cls_score, bbox_pred}.*, roi_heads.mask_head.i.0.*,
// roi_heads.mask_predictor.{conv5_mask, mask_fcn_logits}.* (C4: the same without fpn, box_head
// and mask_head).
// The first stage (feature extractor + RPN head) and the second stage (region features -> box
// classifier, mask head) are separate calls; targets, sampling, NMS and losses live in
// meta_archs/faster_rcnn.
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <array>
#include <utility>
#include <vector>

#include "detseg/models/layers/conv_bn_act.h"
#include "detseg/models/retinanet_network.h"

namespace detseg {

struct FasterRcnnNetworkOptions {
  explicit FasterRcnnNetworkOptions(int64_t num_classes = 90) : num_classes_(num_classes) {}
  // Object classes without background; the predictors have num_classes + 1 outputs, background
  // first (torchvision's COCO model: 90 + 1).
  TORCH_ARG(int64_t, num_classes);
  TORCH_ARG(int64_t, depth) = 50;          // ResNet-18/34/50/101
  TORCH_ARG(bool, frozen_bn) = true;
  TORCH_ARG(int64_t, frozen_stages) = 2;   // torchvision trainable_backbone_layers = 5 - this
  TORCH_ARG(int64_t, fpn_channels) = 256;
  TORCH_ARG(int64_t, num_anchors) = 3;     // anchors per location and level
  // RPN conv: kernel size, output depth (torchvision: 3 and the FPN width) and atrous rate.
  TORCH_ARG(int64_t, rpn_kernel_size) = 3;
  TORCH_ARG(int64_t, rpn_depth) = 256;
  TORCH_ARG(int64_t, rpn_atrous_rate) = 1;
  TORCH_ARG(int64_t, box_pool_size) = 7;   // RoI features fed to the box head (pool x pool)
  TORCH_ARG(int64_t, representation_size) = 1024;  // TwoMLPHead width
  // One box per class (torchvision: (num_classes + 1) * 4, background included) or one shared box.
  TORCH_ARG(bool, share_box_across_classes) = false;
  TORCH_ARG(bool, masks) = false;          // Mask R-CNN head
  TORCH_ARG(int64_t, mask_pool_size) = 14;  // FPN: RoIAlign size of the mask head; logits are 2x this
  TORCH_ARG(int64_t, mask_layers) = 4;      // FPN: 3x3 convs before the deconv (C4 has none)
  TORCH_ARG(int64_t, mask_depth) = 256;     // channels of those convs and of the deconv's output
  // The reference's ResNet C4 layout instead of FPN: the RPN and the crops read layer3 (stride 16);
  // each region is crop_and_resize'd to initial_crop_size, max-pooled, run through layer4 (stride 1,
  // as the reference's block4) and mean-pooled before the predictor. No fc6/fc7. The mask head
  // (detectron2's C4 head, the reference's 3-stage flow) reads the same layer4 region features:
  // 2x2 stride-2 deconv + ReLU, 1x1 conv, so masks are twice the max-pooled crop size.
  TORCH_ARG(bool, c4) = false;
  TORCH_ARG(int64_t, initial_crop_size) = 14;
  TORCH_ARG(int64_t, maxpool_kernel_size) = 2;
  TORCH_ARG(int64_t, maxpool_stride) = 2;
};

// torchvision's RPNHead: conv.0.0 (conv + ReLU), cls_logits (A per location: one objectness logit,
// the 2-class softmax [0, x] of the reference), bbox_pred (A * 4).
class RpnHeadImpl : public torch::nn::Module {
 public:
  RpnHeadImpl(const FasterRcnnNetworkOptions& options, int64_t in_channels);
  // features: per level [N, C, H_l, W_l] -> objectness [N, sum H_l W_l A], deltas [N, sum H_l W_l A, 4]
  // (torchvision order dx, dy, dw, dh), anchors ordered (level, y, x, anchor).
  std::pair<at::Tensor, at::Tensor> forward(const std::vector<at::Tensor>& features);

  ConvBnAct conv{nullptr};
  torch::nn::Conv2d cls_logits{nullptr}, bbox_pred{nullptr};
};
TORCH_MODULE(RpnHead);

class FasterRcnnNetworkImpl : public torch::nn::Module {
 public:
  explicit FasterRcnnNetworkImpl(const FasterRcnnNetworkOptions& options);

  // images [N, 3, H, W] normalised -> P2..P6 (the last one max-pooled from P5), finest first;
  // C4: {layer3}. Remembers (H, W) for the C4 crops.
  std::vector<at::Tensor> features(const at::Tensor& images);
  // Nominal stride of each map features() returns.
  std::vector<int64_t> strides() const;
  // torchvision's MultiScaleRoIAlign over P2-P5: each box [x1, y1, x2, y2] of rois [K, 5]
  // (batch index first, network-input pixels) reads the level floor(4 + log2(sqrt(area) / 224)),
  // clamped to 2..5, with RoIAlign (sampling ratio 2, not aligned). -> [K, C, size, size].
  // C4: crop_and_resize of layer3 to initial_crop_size (boxes normalised by the image size, TF
  // semantics) then max-pool; `size` is ignored.
  at::Tensor roi_features(const std::vector<at::Tensor>& features, const at::Tensor& rois, int64_t size) const;
  // The second stage's per-region features from roi_features()' output: C4: layer4 (stride 1)
  // -> [K, C5, S, S] (the reference's box_classifier_features); FPN: the pooled features themselves.
  at::Tensor box_classifier_features(const at::Tensor& pooled);
  // Box classifier on box_classifier_features -> class logits [K, num_classes + 1] (background
  // first) and box deltas [K, num_classes + 1, 4] (or [K, 1, 4] shared), torchvision order.
  std::pair<at::Tensor, at::Tensor> box_predictions(const at::Tensor& region_features);
  // The box head's representation [K, representation_size] (C4: the mean of layer4's map: [K, C5]).
  at::Tensor box_representation(const at::Tensor& region_features);
  // The mask head's input for rois [K, 5]: FPN: RoIAlign at mask_pool_size; C4: layer4 on the crops.
  at::Tensor mask_features(const std::vector<at::Tensor>& features, const at::Tensor& rois);
  // Mask head on mask_features [K, C, M, M] -> mask logits [K, num_classes + 1, 2M, 2M].
  at::Tensor mask_logits(const at::Tensor& mask_input);
  // One class's logits per RoI, channels [K] (background = 0) -> [K, 2M, 2M]: mask_logits gathered
  // at those channels, with the 1x1 predictor run for them alone (at inference it was ~20 % of the
  // mask head's time computing all 91 and dropping 90).
  at::Tensor class_mask_logits(const at::Tensor& mask_input, const at::Tensor& channels);
  // Side of the mask logits: 2 x mask_pool_size (FPN) or 2 x the max-pooled crop (C4).
  int64_t mask_size() const;
  // C4: side of a max-pooled crop, (initial_crop_size - kernel) / stride + 1.
  int64_t c4_pooled_size() const;
  // The mask head up to its predictor: convs, 2x2 deconv, ReLU -> [K, mask_depth, 2M, 2M].
  at::Tensor mask_upsampled_features(const at::Tensor& mask_input);

  FasterRcnnNetworkOptions options;
  ResNetFpn backbone{nullptr};  // FPN layout
  ResNet c4_body{nullptr};      // C4 layout, registered as backbone.body
  std::array<int64_t, 2> image_hw{0, 0};
  RpnHead rpn_head{nullptr};  // registered as rpn.head
  torch::nn::Linear fc6{nullptr}, fc7{nullptr};             // roi_heads.box_head
  torch::nn::Linear cls_score{nullptr}, bbox_pred{nullptr};  // roi_heads.box_predictor
  std::vector<ConvBnAct> mask_convs;                        // roi_heads.mask_head.i (FPN)
  torch::nn::ConvTranspose2d conv5_mask{nullptr};           // roi_heads.mask_predictor
  torch::nn::Conv2d mask_fcn_logits{nullptr};
};
TORCH_MODULE(FasterRcnnNetwork);

// Level of each box [K, 4] for MultiScaleRoIAlign (torchvision's LevelMapper, canonical 224 at
// level 4), clamped to [min_level, max_level]; int64 [K].
at::Tensor fpn_roi_levels(const at::Tensor& boxes, int64_t min_level, int64_t max_level);

}  // namespace detseg
