#include "detseg/models/build.h"

#include <cmath>

#include "detseg/core/error.h"
#include "detseg/models/efficientdet_network.h"
#include "detseg/models/deeplab_network.h"
#include "detseg/models/meta_archs/dense_detector.h"
#include "detseg/models/meta_archs/semantic_segmenter.h"
#include "detseg/train/name_pattern.h"
#include "detseg/train/optimizer.h"
#include "detseg/models/retinanet_network.h"

namespace detseg {
namespace {

DenseDetectorOptions dense_options(const PipelineConfig& config) {
  const ModelConfig& m = config.model;
  DenseDetectorOptions o;
  o.num_classes = m.num_classes;
  o.image_size = m.image_size;
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
  o.loss.alpha(m.focal_alpha).gamma(m.focal_gamma).delta(m.huber_delta).box_loss_weight(m.box_loss_weight);
  const PostprocessConfig& p = config.postprocess;
  o.postprocess.max_detection_points = p.max_detection_points;
  o.postprocess.score_threshold = p.score_threshold;
  o.postprocess.nms_iou_threshold = p.nms_iou_threshold;
  o.postprocess.max_detections_per_image = p.max_detections_per_image;
  return o;
}

int64_t resnet_depth(const std::string& backbone) {
  if (backbone.rfind("resnet", 0) == 0) return std::stoll(backbone.substr(6));
  throw ConfigError(location(backbone) + "model.backbone: RetinaNet takes a ResNet (resnet18/34/50/101), got " +
                    backbone);
}

}  // namespace

bool is_segmentation_model(const PipelineConfig& config) {
  return config.model.type == "deeplabv3plus" || config.model.type == "deeplabv3";
}

std::shared_ptr<SegmenterImpl> build_segmenter(const PipelineConfig& config) {
  const ModelConfig& m = config.model;
  const DeepLabConfig& d = m.deeplab;
  DETSEG_CONFIG_CHECK(is_segmentation_model(config), location(config.source), "model.type: ", m.type,
                      " is not a segmentation model (deeplabv3plus, deeplabv3)");
  DeepLabNetworkOptions net(m.num_classes);
  net.backbone(m.backbone)
      .output_stride(d.output_stride)
      .decoder(m.type == "deeplabv3plus" && d.low_level_channels > 0)
      .frozen_bn(m.frozen_batch_norm)
      .aspp_channels(d.aspp_channels)
      .aspp_dropout(d.aspp_dropout)
      .image_pooling(d.image_pooling)
      .low_level_channels(d.low_level_channels)
      .decoder_channels(d.decoder_channels);
  SemanticSegmenterOptions o;
  o.num_classes = m.num_classes;
  o.crop_size = d.crop_size;
  o.loss.ignore_label(d.ignore_label)
      .loss_weight(d.loss_weight)
      .upsample_logits(d.upsample_logits)
      .top_k_percent_pixels(d.top_k_percent_pixels)
      .hard_example_mining_step(d.hard_example_mining_step);
  o.eval_scales = d.eval_scales;
  o.eval_flip = d.eval_flip;
  return std::make_shared<SemanticSegmenterImpl>(o, DeepLabNetwork(net));
}

std::shared_ptr<ModelImpl> build_model(const PipelineConfig& config) {
  if (is_segmentation_model(config)) return build_segmenter(config);
  return build_detector(config);
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

std::shared_ptr<DetectorImpl> build_detector(const PipelineConfig& config) {
  const ModelConfig& m = config.model;
  DenseDetectorOptions options = dense_options(config);
  const int64_t num_anchors = m.num_scales * static_cast<int64_t>(m.aspect_ratios.size());
  DETSEG_CONFIG_CHECK(m.min_level == 3 && m.max_level == 7, location(config.source),
                      "model.min_level/max_level: the RetinaNet and EfficientDet networks produce P3-P7");
  if (m.type == "retinanet") {
    RetinaNetNetworkOptions net_options(m.num_classes);
    net_options.depth(resnet_depth(m.backbone))
        .frozen_bn(m.frozen_batch_norm)
        .frozen_stages(5 - m.trainable_backbone_stages)
        .fpn_channels(m.fpn_channels)
        .num_anchors(num_anchors);
    auto network = std::make_shared<RetinaNetNetworkImpl>(net_options);
    return std::make_shared<DenseDetectorImpl>(options, network,
                                               [network](const at::Tensor& x) { return network->forward(x); });
  }
  if (m.type == "efficientdet") {
    const int64_t coef = m.efficientdet[1] - '0';
    EfficientDetNetworkOptions net_options(coef, m.num_classes);
    net_options.num_anchors(num_anchors);
    auto network = std::make_shared<EfficientDetNetworkImpl>(net_options);
    return std::make_shared<DenseDetectorImpl>(options, network,
                                               [network](const at::Tensor& x) { return network->forward(x); });
  }
  throw ConfigError(location(config.source) + "model.type: unknown meta-architecture " + m.type);
}

}  // namespace detseg
