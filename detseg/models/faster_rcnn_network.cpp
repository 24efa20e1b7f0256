// Implements: Faster R-CNN / Mask R-CNN networks (ResNet + FPN in torchvision's layout, or ResNet C4).
#include "detseg/models/faster_rcnn_network.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cmath>

#include "detseg/core/error.h"
#include "detseg/models/heads/retinanet_head.h"
#include "detseg/ops/crop_and_resize.h"
#include "detseg/ops/conv_transpose.h"
#include "detseg/ops/roi_align.h"
#include "detseg/structures/boxes.h"
#include "detseg/structures/tensor_utils.h"

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

RpnHeadImpl::RpnHeadImpl(const FasterRcnnNetworkOptions& o, int64_t in_channels) {
  const int64_t k = o.rpn_kernel_size(), rate = o.rpn_atrous_rate();
  DETSEG_CONFIG_CHECK(k % 2 == 1, "RPN: kernel size must be odd, got ", k);
  conv = ConvBnAct(ConvBnActOptions(in_channels, o.rpn_depth(), k).norm(false));
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
  const ResNetOptions body_options = ResNetOptions(o.depth()).frozen_bn(o.frozen_bn()).frozen_stages(o.frozen_stages());
  int64_t rpn_in = o.fpn_channels(), representation = o.representation_size();
  auto roi_heads = std::make_shared<torch::nn::Module>("RoIHeads");
  if (o.c4()) {
    DETSEG_CONFIG_CHECK(o.initial_crop_size() >= o.maxpool_kernel_size(), "Faster R-CNN C4: initial_crop_size (",
                        o.initial_crop_size(), ") must be at least maxpool_kernel_size (", o.maxpool_kernel_size(), ")");
    auto holder = std::make_shared<torch::nn::Module>("BackboneC4");
    c4_body = holder->register_module("body", ResNet(ResNetOptions(body_options).returned_layers({3})));
    register_module("backbone", holder);
    // The reference's block4 keeps the crop's resolution: stride 1 in layer4's first block.
    ResNetBlock& first = c4_body->stages[3][0];
    (first->bottleneck ? first->conv2 : first->conv1)->options.stride(1);
    if (first->down_conv) first->down_conv->options.stride(1);
    rpn_in = c4_body->stage_channels[2];
    representation = c4_body->stage_channels[3];
  } else {
    backbone = register_module(
        "backbone", ResNetFpn(ResNetOptions(body_options).returned_layers({1, 2, 3, 4}),
                              FpnOptions({}, o.fpn_channels()).extra_p6p7(false).extra_max_pool(true)));
    auto box_head = std::make_shared<torch::nn::Module>("TwoMLPHead");
    const int64_t pooled = o.fpn_channels() * o.box_pool_size() * o.box_pool_size();
    fc6 = box_head->register_module("fc6", torch::nn::Linear(pooled, o.representation_size()));
    fc7 = box_head->register_module("fc7", torch::nn::Linear(o.representation_size(), o.representation_size()));
    roi_heads->register_module("box_head", box_head);
  }
  auto rpn = std::make_shared<torch::nn::Module>("RegionProposalNetwork");
  rpn_head = rpn->register_module("head", RpnHead(o, rpn_in));
  register_module("rpn", rpn);

  auto predictor = std::make_shared<torch::nn::Module>("FastRCNNPredictor");
  const int64_t k1 = o.num_classes() + 1;
  cls_score = predictor->register_module("cls_score", torch::nn::Linear(representation, k1));
  bbox_pred = predictor->register_module(
      "bbox_pred", torch::nn::Linear(representation, (o.share_box_across_classes() ? 1 : k1) * 4));
  roi_heads->register_module("box_predictor", predictor);
  if (o.masks()) {
    // FPN: torchvision's MaskRCNNHeads (mask_layers 3x3 convs) on RoIAlign features. C4: the
    // layer4 region features go straight to the deconv (detectron2's C4 head has no convs).
    int64_t in = o.c4() ? c4_body->stage_channels[3] : o.fpn_channels();
    if (!o.c4()) {
      torch::nn::ModuleList mask_head;
      for (int64_t i = 0; i < o.mask_layers(); ++i) {
        mask_convs.emplace_back(ConvBnActOptions(in, o.mask_depth(), 3).norm(false));
        init_kaiming(mask_convs.back()->conv->weight, mask_convs.back()->conv->bias);
        mask_head->push_back(mask_convs.back());
        in = o.mask_depth();
      }
      roi_heads->register_module("mask_head", mask_head);
    }
    auto mask_predictor = std::make_shared<torch::nn::Module>("MaskRCNNPredictor");
    conv5_mask = mask_predictor->register_module(
        "conv5_mask", torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(in, o.mask_depth(), 2).stride(2)));
    mask_fcn_logits = mask_predictor->register_module(
        "mask_fcn_logits", torch::nn::Conv2d(torch::nn::Conv2dOptions(o.mask_depth(), k1, 1)));
    init_kaiming(conv5_mask->weight, conv5_mask->bias);
    init_kaiming(mask_fcn_logits->weight, mask_fcn_logits->bias);
    roi_heads->register_module("mask_predictor", mask_predictor);
  }
  register_module("roi_heads", roi_heads);
}

std::vector<at::Tensor> FasterRcnnNetworkImpl::features(const at::Tensor& images) {
  image_hw = {images.size(2), images.size(3)};
  return options.c4() ? c4_body->forward(images) : backbone->forward(images);
}

std::vector<int64_t> FasterRcnnNetworkImpl::strides() const {
  if (options.c4()) return {16};
  return {4, 8, 16, 32, 64};
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
  // Under autocast the maps are bf16/fp16; the pooling runs in fp32 and hands back the maps'
  // dtype, as torchvision's roi_align does under autocast (and the CPU kernels take float/double
  // only). No-ops for fp32 maps.
  const auto map_dtype = features[0].scalar_type();
  auto fp32 = [](const at::Tensor& t) { return upcast_low_precision(t); };
  if (options.c4()) {
    // The reference's crop_and_resize on boxes normalised by the image, then max-pooling.
    if (k == 0) return at::zeros({0, features[0].size(1), c4_pooled_size(), c4_pooled_size()}, features[0].options());
    CropAndResizeOptions cr;
    cr.crop_size = {options.initial_crop_size(), options.initial_crop_size()};
    at::Tensor boxes = xyxy_to_normalized_yxyx(rois.slice(1, 1, 5), static_cast<double>(image_hw[0]),
                                               static_cast<double>(image_hw[1]));
    at::Tensor crops = crop_and_resize(fp32(features[0]), boxes, rois.select(1, 0).to(at::kInt), cr).to(map_dtype);
    const int64_t kk = options.maxpool_kernel_size(), ks = options.maxpool_stride();
    return at::max_pool2d(crops, {kk, kk}, {ks, ks}, {0, 0}, {1, 1});
  }
  if (k == 0) return at::zeros({0, features[0].size(1), size, size}, features[0].options());
  RoiAlignOptions ro;
  ro.output_size = {size, size};
  ro.sampling_ratio = 2;
  ro.aligned = false;
  if (num_levels == 1) {
    ro.spatial_scale = 0.25;
    return roi_align(fp32(features[0]), rois, ro).to(map_dtype);
  }
  at::Tensor out = at::zeros({k, features[0].size(1), size, size}, features[0].options());
  at::Tensor levels = fpn_roi_levels(rois.slice(1, 1, 5), 2, 1 + num_levels);
  for (int64_t l = 0; l < num_levels; ++l) {
    at::Tensor idx = (levels == l + 2).nonzero().squeeze(1);
    if (idx.numel() == 0) continue;
    ro.spatial_scale = 1.0 / static_cast<double>(int64_t{4} << l);
    out.index_copy_(0, idx, roi_align(fp32(features[static_cast<size_t>(l)]), rois.index_select(0, idx), ro).to(map_dtype));
  }
  return out;
}

int64_t FasterRcnnNetworkImpl::c4_pooled_size() const {
  return (options.initial_crop_size() - options.maxpool_kernel_size()) / options.maxpool_stride() + 1;
}

int64_t FasterRcnnNetworkImpl::mask_size() const {
  return 2 * (options.c4() ? c4_pooled_size() : options.mask_pool_size());
}

at::Tensor FasterRcnnNetworkImpl::box_classifier_features(const at::Tensor& pooled) {
  if (!options.c4()) return pooled;
  at::Tensor y = pooled;
  for (auto& block : c4_body->stages[3]) y = block->forward(y);
  return y;
}

at::Tensor FasterRcnnNetworkImpl::box_representation(const at::Tensor& region_features) {
  if (options.c4()) return region_features.mean({2, 3});
  at::Tensor x = at::relu(fc6->forward(region_features.flatten(1)));
  return at::relu(fc7->forward(x));
}

std::pair<at::Tensor, at::Tensor> FasterRcnnNetworkImpl::box_predictions(const at::Tensor& region_features) {
  at::Tensor x = box_representation(region_features);
  at::Tensor deltas = bbox_pred->forward(x);
  return {cls_score->forward(x), deltas.unflatten(1, {-1, 4})};
}

at::Tensor FasterRcnnNetworkImpl::mask_features(const std::vector<at::Tensor>& features, const at::Tensor& rois) {
  if (options.c4()) return box_classifier_features(roi_features(features, rois, 0));
  return roi_features(features, rois, options.mask_pool_size());
}

at::Tensor FasterRcnnNetworkImpl::mask_upsampled_features(const at::Tensor& mask_input) {
  DETSEG_CHECK(options.masks(), "Faster R-CNN network: built without a mask head");
  at::Tensor x = mask_input;
  for (auto& c : mask_convs) x = c->forward(x);
  at::Tensor up = conv_transpose2x2_stride2(x, conv5_mask->weight, conv5_mask->bias);
  return at::relu_(up);
}

at::Tensor FasterRcnnNetworkImpl::mask_logits(const at::Tensor& mask_input) {
  return mask_fcn_logits->forward(mask_upsampled_features(mask_input));
}

at::Tensor FasterRcnnNetworkImpl::class_mask_logits(const at::Tensor& mask_input, const at::Tensor& channels) {
  const at::Tensor x = mask_upsampled_features(mask_input);  // [K, D, S, S]
  const int64_t k = x.size(0), depth = x.size(1), side = x.size(2);
  DETSEG_CHECK(channels.dim() == 1 && channels.size(0) == k, "class_mask_logits: expected ", k,
               " channels, got ", channels.sizes());
  const at::Tensor w = mask_fcn_logits->weight.view({-1, depth}).index_select(0, channels).unsqueeze(1);  // [K, 1, D]
  const at::Tensor b = mask_fcn_logits->bias.index_select(0, channels).view({k, 1, 1});
  return at::baddbmm(b, w, x.reshape({k, depth, side * side})).view({k, side, side});
}

}  // namespace detseg
