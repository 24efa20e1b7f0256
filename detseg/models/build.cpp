#include "detseg/models/build.h"

#include <cmath>

#include "detseg/config/registry.h"
#include "detseg/core/error.h"
#include "detseg/models/efficientdet_network.h"
#include "detseg/models/deeplab_network.h"
#include "detseg/models/meta_archs/faster_rcnn.h"
#include "detseg/models/meta_archs/dense_detector.h"
#include "detseg/models/meta_archs/semantic_segmenter.h"
#include "detseg/train/name_pattern.h"
#include "detseg/train/optimizer.h"
#include "detseg/models/registry.h"
#include "detseg/models/retinanet_network.h"

namespace detseg {
DenseDetectorOptions dense_detector_options(const PipelineConfig& config) {
  const ModelConfig& m = config.model;
  DenseDetectorOptions o;
  o.num_classes = m.num_classes;
  o.image_size = m.image_size;
  if (m.resizer == "keep_aspect") o.size_divisibility = keep_aspect_size_divisibility(m);
  o.anchors.min_level = m.min_level;
  o.anchors.max_level = m.max_level;
  o.anchors.num_scales = m.num_scales;
  o.anchors.anchor_scale = m.anchor_scale;
  // A ratio r = width / height becomes EfficientDet's (x, y) multipliers (sqrt r, 1 / sqrt r):
  // 2.0 -> (1.41, 0.71), the reference's (1.4, 0.7).
  o.anchors.aspect_ratios.clear();
  for (double r : m.aspect_ratios) o.anchors.aspect_ratios.push_back({std::sqrt(r), 1.0 / std::sqrt(r)});
  o.labeler.match_threshold = m.matched_threshold;
  o.labeler.unmatched_threshold = m.unmatched_threshold;
  o.loss.alpha(m.focal_alpha).gamma(m.focal_gamma).delta(m.huber_delta);
  o.loss.box_loss(box_loss_function(m.box_loss)).box_loss_weight(box_loss_weight_of(m.box_loss, m.box_loss_weight));
  const PostprocessConfig& p = config.postprocess;
  o.postprocess.max_detection_points = p.max_detection_points;
  o.postprocess.score_threshold = p.score_threshold;
  o.postprocess.nms_iou_threshold = p.nms_iou_threshold;
  o.postprocess.max_detections_per_image = p.max_detections_per_image;
  o.postprocess.nms = parse_nms_method(p.nms);
  o.postprocess.soft_nms_sigma = p.soft_nms_sigma;
  return o;
}

namespace {

int64_t dense_num_anchors(const ModelConfig& m) { return m.num_scales * static_cast<int64_t>(m.aspect_ratios.size()); }

int64_t resnet_depth(const std::string& backbone, const std::string& source) {
  if (backbone.rfind("resnet", 0) == 0) return std::stoll(backbone.substr(6));
  throw ConfigError(location(source) + "model.backbone: RetinaNet and Faster R-CNN take a ResNet (resnet18/34/50/101), got " +
                    backbone);
}


}  // namespace

// The builders config/parts.def names (models/registry.cpp's table).

namespace {

std::shared_ptr<ModelImpl> faster_rcnn_with(const PipelineConfig& config, bool masks) {
  const ModelConfig& m = config.model;
  const FasterRcnnConfig& f = m.faster_rcnn;
  FasterRcnnOptions o;
  static_cast<FasterRcnnConfig&>(o) = f;  // the config section is the options
  o.num_classes = m.num_classes;
  o.image_size = m.image_size;
  if (m.resizer == "keep_aspect") o.size_divisibility = keep_aspect_size_divisibility(m);
  o.postprocess = config.postprocess;
  FasterRcnnNetworkOptions net(m.num_classes);
  net.depth(resnet_depth(m.backbone, config.source))
      .frozen_bn(m.frozen_batch_norm)
      .frozen_stages(5 - m.trainable_backbone_stages)
      .fpn_channels(m.fpn_channels)
      .rpn_kernel_size(f.first_stage_box_predictor_kernel_size)
      .rpn_depth(f.first_stage_box_predictor_depth)
      .rpn_atrous_rate(f.first_stage_atrous_rate)
      .representation_size(f.representation_size)
      .box_pool_size(f.box_pool_size)
      .share_box_across_classes(f.share_box_across_classes)
      .masks(masks)
      .mask_pool_size(f.mask_pool_size)
      .mask_depth(f.mask_head_depth)
      .c4(f.feature_extractor == "c4")
      .initial_crop_size(f.initial_crop_size)
      .maxpool_kernel_size(f.maxpool_kernel_size)
      .maxpool_stride(f.maxpool_stride);
  return std::make_shared<FasterRcnnImpl>(o, net);
}

}  // namespace

std::shared_ptr<ModelImpl> build_faster_rcnn(const PipelineConfig& config) { return faster_rcnn_with(config, false); }
std::shared_ptr<ModelImpl> build_mask_rcnn(const PipelineConfig& config) { return faster_rcnn_with(config, true); }

namespace {

std::shared_ptr<ModelImpl> deeplab_with(const PipelineConfig& config, bool decoder) {
  const ModelConfig& m = config.model;
  const DeepLabConfig& d = m.deeplab;
  DeepLabNetworkOptions net(m.num_classes);
  net.backbone(m.backbone)
      .output_stride(d.output_stride)
      .decoder(decoder && d.low_level_channels > 0)
      .frozen_bn(m.frozen_batch_norm)
      .aspp_channels(d.aspp_channels)
      .aspp_dropout(d.aspp_dropout)
      .image_pooling(d.image_pooling)
      .low_level_channels(d.low_level_channels)
      .decoder_channels(d.decoder_channels)
      .head_conv(d.head_conv);
  SemanticSegmenterOptions o;
  o.num_classes = m.num_classes;
  o.crop_size = d.crop_size;
  o.loss.ignore_label(d.ignore_label)
      .loss_weight(d.loss_weight)
      .class_weights(d.class_weights)
      .upsample_logits(d.upsample_logits)
      .top_k_percent_pixels(d.top_k_percent_pixels)
      .hard_example_mining_step(d.hard_example_mining_step);
  o.eval_scales = d.eval_scales;
  o.eval_flip = d.eval_flip;
  return std::make_shared<SemanticSegmenterImpl>(o, DeepLabNetwork(net));
}

}  // namespace

std::shared_ptr<ModelImpl> build_deeplabv3(const PipelineConfig& config) { return deeplab_with(config, false); }
std::shared_ptr<ModelImpl> build_deeplabv3plus(const PipelineConfig& config) { return deeplab_with(config, true); }

std::shared_ptr<ModelImpl> build_retinanet(const PipelineConfig& config) {
  const ModelConfig& m = config.model;
  RetinaNetNetworkOptions net_options(m.num_classes);
  net_options.depth(resnet_depth(m.backbone, config.source))
      .frozen_bn(m.frozen_batch_norm)
      .frozen_stages(5 - m.trainable_backbone_stages)
      .fpn_channels(m.fpn_channels)
      .num_anchors(dense_num_anchors(m))
      .head_group_norm_groups(m.head_norm == "group_norm" ? 32 : 0)
      .neck(neck_of(m))
      .head(head_of(m))
      .bn_momentum(m.batch_norm_momentum);
  auto network = std::make_shared<RetinaNetNetworkImpl>(net_options);
  return std::make_shared<DenseDetectorImpl>(dense_detector_options(config), network,
                                             [network](const at::Tensor& x) { return network->forward(x); });
}

std::shared_ptr<ModelImpl> build_efficientdet(const PipelineConfig& config) {
  const ModelConfig& m = config.model;
  EfficientDetNetworkOptions net_options(efficientdet_compound_coef(m.efficientdet), m.num_classes);
  net_options.num_anchors(dense_num_anchors(m));
  net_options.bn_momentum(m.batch_norm_momentum)
      .neck(neck_of(m))
      .head(head_of(m))
      .head_group_norm_groups(m.head_norm == "group_norm" ? 32 : 0);
  auto network = std::make_shared<EfficientDetNetworkImpl>(net_options);
  return std::make_shared<DenseDetectorImpl>(dense_detector_options(config), network,
                                             [network](const at::Tensor& x) { return network->forward(x); });
}

bool uses_instance_masks(const ModelConfig& model) {
  const ModelTypeInfo* type = find_model_type(model.type);
  return type != nullptr && type->instance_masks;
}

bool is_segmentation_model(const PipelineConfig& config) {
  const ModelTypeInfo* type = find_model_type(config.model.type);
  return type != nullptr && type->kind == "segmenter";
}

std::shared_ptr<ModelImpl> build_model(const PipelineConfig& config) { return model_builder(config.model.type)(config); }

std::shared_ptr<SegmenterImpl> build_segmenter(const PipelineConfig& config) {
  DETSEG_CONFIG_CHECK(is_segmentation_model(config), location(config.source), "model.type: ", config.model.type,
                      " is not a segmentation model");
  return std::static_pointer_cast<SegmenterImpl>(build_model(config));  // its kind says so
}

std::shared_ptr<DetectorImpl> build_detector(const PipelineConfig& config) {
  DETSEG_CONFIG_CHECK(!is_segmentation_model(config), location(config.source), "model.type: ", config.model.type,
                      " is not a detector");
  return std::static_pointer_cast<DetectorImpl>(build_model(config));
}

std::vector<GradientMultiplier> model_gradient_multipliers(const PipelineConfig& config) {
  if (!is_segmentation_model(config) || !config.model.deeplab.gradient_multipliers) return {};
  return deeplab_gradient_multipliers(config.model.deeplab.last_layers, config.model.deeplab.last_layer_gradient_multiplier);
}

std::string model_fine_tune_exclude(const PipelineConfig& config) {
  if (!is_segmentation_model(config) || config.model.deeplab.initialize_last_layer) return "";
  std::string out;
  for (const auto& layer : config.model.deeplab.last_layers) out += (out.empty() ? "" : "|") + escape_regex(layer);
  return out;
}

FineTuneOptions pretrained_fine_tune_options(const PipelineConfig& config, const std::string& file) {
  FineTuneOptions o;
  o.checkpoint = file;
  o.type = "classification";
  // Our backbones carry torchvision's names below their holder, the model's backbone_scope:
  // RetinaNet and Faster/Mask R-CNN hold the ResNet as backbone.body (torchvision's detection
  // layout, the FPN beside it in backbone.fpn); DeepLab and EfficientDet hold it as backbone itself.
  const ModelTypeInfo* type = find_model_type(config.model.type);
  DETSEG_CONFIG_CHECK(type != nullptr, "model.type: unknown meta-architecture ", config.model.type);
  o.feature_extractor_pattern = "^" + escape_regex(type->backbone_scope);
  o.scope_map = {{o.feature_extractor_pattern, ""}};
  // A file for another backbone must fail loudly, not leave half the backbone random.
  o.skip_missing = false;
  o.skip_mismatched = false;
  return o;
}

}  // namespace detseg
