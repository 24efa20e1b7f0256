#include "detseg/models/build.h"

#include <cmath>

#include "detseg/core/error.h"
#include "detseg/models/efficientdet_network.h"
#include "detseg/models/meta_archs/dense_detector.h"
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
