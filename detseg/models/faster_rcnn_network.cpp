// Implements: Faster R-CNN / Mask R-CNN networks (ResNet + FPN), torchvision layout.
#include "detseg/models/faster_rcnn_network.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cmath>

#include "detseg/core/error.h"
#include "detseg/models/heads/retinanet_head.h"
#include "detseg/ops/roi_align.h"

namespace detseg {

namespace {
void init_normal(torch::nn::Conv2d& conv, double std) {
  torch::nn::init::normal_(conv->weight, 0.0, std);
  torch::nn::init::zeros_(conv->bias);
}
// torchvision MaskRCNNHeads / MaskRCNNPredictor: kaiming normal (fan_out, relu), bias 0.
void init_kaiming(at::Tensor& weight, at::Tensor& bias) {
  torch::nn::init::kaiming_normal_(weight, 0.0, torch::kFanOut, torch::kReLU);
  torch::nn::init::zeros_(bias);
}
}  // namespace

RpnHeadImpl::RpnHeadImpl(const FasterRcnnNetworkOptions& o) {
  const int64_t k = o.rpn_kernel_size(), rate = o.rpn_atrous_rate();
  DETSEG_CONFIG_CHECK(k % 2 == 1, "RPN: kernel size must be odd, got ", k);
  conv = ConvBnAct(ConvBnActOptions(o.fpn_channels(), o.rpn_depth(), k).norm(false));
  // Atrous rate: dilation with "same" padding.
  conv->conv->options.dilation(rate).padding(rate * (k - 1) / 2);
  torch::nn::ModuleList conv_list;
  conv_list->push_back(conv);
  register_module("conv", conv_list);
  cls_logits = register_module("cls_logits", torch::nn::Conv2d(torch::nn::Conv2dOptions(o.rpn_depth(), o.num_anchors(), 1)));
  bbox_pred = register_module("bbox_pred", torch::nn::Conv2d(torch::nn::Conv2dOptions(o.rpn_depth(), o.num_anchors() * 4, 1)));
  init_normal(conv->conv, 0.01);
  init_normal(cls_logits, 0.01);
  init_normal(bbox_pred, 0.01);
}

std::pair<at::Tensor, at::Tensor> RpnHeadImpl::forward(const std::vector<at::Tensor>& features) {
  std::vector<at::Tensor> objectness, deltas;
  for (const at::Tensor& f : features) {
    at::Tensor t = conv->forward(f);
    objectness.push_back(flatten_dense_prediction(cls_logits->forward(t), 1).squeeze(2));
    deltas.push_back(flatten_dense_prediction(bbox_pred->forward(t), 4));
  }
  return {at::cat(objectness, 1), at::cat(deltas, 1)};
}

FasterRcnnNetworkImpl::FasterRcnnNetworkImpl(const FasterRcnnNetworkOptions& options_) : options(options_) {
  const auto& o = options;
  DETSEG_CONFIG_CHECK(o.num_classes() >= 1, "Faster R-CNN: num_classes must be >= 1, got ", o.num_classes());
  backbone = register_module(
      "backbone", ResNetFpn(ResNetOptions(o.depth())
                                .frozen_bn(o.frozen_bn())
                                .frozen_stages(o.frozen_stages())
                                .returned_layers({1, 2, 3, 4}),
                            FpnOptions({}, o.fpn_channels()).extra_p6p7(false).extra_max_pool(true)));
  auto rpn = std::make_shared<torch::nn::Module>("RegionProposalNetwork");
  rpn_head = rpn->register_module("head", RpnHead(o));
  register_module("rpn", rpn);

  auto roi_heads = std::make_shared<torch::nn::Module>("RoIHeads");
  auto box_head = std::make_shared<torch::nn::Module>("TwoMLPHead");
  const int64_t pooled = o.fpn_channels() * o.box_pool_size() * o.box_pool_size();
  fc6 = box_head->register_module("fc6", torch::nn::Linear(pooled, o.representation_size()));
  fc7 = box_head->register_module("fc7", torch::nn::Linear(o.representation_size(), o.representation_size()));
  roi_heads->register_module("box_head", box_head);
  auto predictor = std::make_shared<torch::nn::Module>("FastRCNNPredictor");
  const int64_t k1 = o.num_classes() + 1;
  cls_score = predictor->register_module("cls_score", torch::nn::Linear(o.representation_size(), k1));
  bbox_pred = predictor->register_module(
      "bbox_pred", torch::nn::Linear(o.representation_size(), (o.share_box_across_classes() ? 1 : k1) * 4));
  roi_heads->register_module("box_predictor", predictor);
  if (o.masks()) {
    torch::nn::ModuleList mask_head;
    int64_t in = o.fpn_channels();
    for (int64_t i = 0; i < o.mask_layers(); ++i) {
      mask_convs.emplace_back(ConvBnActOptions(in, o.mask_depth(), 3).norm(false));
      init_kaiming(mask_convs.back()->conv->weight, mask_convs.back()->conv->bias);
      mask_head->push_back(mask_convs.back());
      in = o.mask_depth();
    }
    roi_heads->register_module("mask_head", mask_head);
    auto mask_predictor = std::make_shared<torch::nn::Module>("MaskRCNNPredictor");
    conv5_mask = mask_predictor->register_module(
        "conv5_mask", torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(in, in, 2).stride(2)));
    mask_fcn_logits = mask_predictor->register_module("mask_fcn_logits", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, k1, 1)));
    init_kaiming(conv5_mask->weight, conv5_mask->bias);
    init_kaiming(mask_fcn_logits->weight, mask_fcn_logits->bias);
    roi_heads->register_module("mask_predictor", mask_predictor);
  }
  register_module("roi_heads", roi_heads);
}

std::vector<at::Tensor> FasterRcnnNetworkImpl::features(const at::Tensor& images) {
  return backbone->forward(images);
}

at::Tensor fpn_roi_levels(const at::Tensor& boxes, int64_t min_level, int64_t max_level) {
  at::Tensor area = (boxes.select(1, 2) - boxes.select(1, 0)) * (boxes.select(1, 3) - boxes.select(1, 1));
  at::Tensor level = at::floor(4 + at::log2(at::sqrt(area) / 224) + 1e-6);
  return level.clamp(min_level, max_level).to(at::kLong);
}

at::Tensor FasterRcnnNetworkImpl::roi_features(const std::vector<at::Tensor>& features, const at::Tensor& rois,
                                               int64_t size) const {
  // P2..P5 (the pooled P6 is for the RPN only, as in torchvision).
  const int64_t num_levels = std::min<int64_t>(4, static_cast<int64_t>(features.size()));
  const int64_t k = rois.size(0);
  at::Tensor out = at::zeros({k, features[0].size(1), size, size}, features[0].options());
  if (k == 0) return out;
  RoiAlignOptions ro;
  ro.output_size = {size, size};
  ro.sampling_ratio = 2;
  ro.aligned = false;
  if (num_levels == 1) {
    ro.spatial_scale = 0.25;
    return roi_align(features[0], rois, ro);
  }
  at::Tensor levels = fpn_roi_levels(rois.slice(1, 1, 5), 2, 1 + num_levels);
  for (int64_t l = 0; l < num_levels; ++l) {
    at::Tensor idx = (levels == l + 2).nonzero().squeeze(1);
    if (idx.numel() == 0) continue;
    ro.spatial_scale = 1.0 / static_cast<double>(int64_t{4} << l);
    out = out.index_put({idx}, roi_align(features[static_cast<size_t>(l)], rois.index_select(0, idx), ro));
  }
  return out;
}

at::Tensor FasterRcnnNetworkImpl::box_representation(const at::Tensor& pooled) {
  at::Tensor x = at::relu(fc6->forward(pooled.flatten(1)));
  return at::relu(fc7->forward(x));
}

std::pair<at::Tensor, at::Tensor> FasterRcnnNetworkImpl::box_predictions(const at::Tensor& pooled) {
  at::Tensor x = box_representation(pooled);
  at::Tensor deltas = bbox_pred->forward(x);
  return {cls_score->forward(x), deltas.view({deltas.size(0), -1, 4})};
}

at::Tensor FasterRcnnNetworkImpl::mask_logits(const at::Tensor& pooled) {
  DETSEG_CHECK(options.masks(), "Faster R-CNN network: built without a mask head");
  at::Tensor x = pooled;
  for (auto& c : mask_convs) x = c->forward(x);
  x = at::relu(conv5_mask->forward(x));
  return mask_fcn_logits->forward(x);
}

}  // namespace detseg
