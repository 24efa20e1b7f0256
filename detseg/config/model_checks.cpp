// Implements: the config rules that belong to one model type, named by its config/parts.def line
// (config/registry.cpp declares them from there). check_consistency (config.cpp) applies the shared
// rules first, then the model's own.
#include <cstdint>
#include <string>

#include "detseg/config/config.h"
#include "detseg/config/efficientdet_sizes.h"
#include "detseg/config/registry.h"
#include "detseg/core/error.h"

namespace detseg {
namespace {

// model.head_norm is read by the retinanet head only (model.head): GroupNorm(32) after each subnet
// conv. width: the head's channels (RetinaNet's model.fpn_channels, EfficientDet's size's width); 0
// for models without that head.
void check_head_norm(const PipelineConfig& c, const std::string& at, int64_t width) {
  if (c.model.head_norm == "none") return;
  const std::string head = head_of(c.model);
  DETSEG_CONFIG_CHECK(head == "retinanet" && width % 32 == 0, at,
                      "model.head_norm: group_norm is for the retinanet head with a width that is a multiple of 32 "
                      "(32 groups), got ", c.model.type, " with ", head.empty() ? "its own head" : head + " head",
                      width > 0 ? " and " + std::to_string(width) + " channels" : "");
}

// model.box_loss (and its weight) is read by the dense detectors only; the others have their own
// box terms (model.faster_rcnn.*_loss_weight) or none.
void check_box_loss_unused(const PipelineConfig& c, const std::string& at) {
  DETSEG_CONFIG_CHECK(c.model.box_loss == "huber" && c.model.box_loss_weight == -1, at,
                      "model.box_loss/box_loss_weight are RetinaNet's and EfficientDet's; ", c.model.type,
                      " does not read them");
}

// The RetinaNet and EfficientDet networks have their pyramid levels built in.
void check_p3_to_p7(const PipelineConfig& c, const std::string& at) {
  DETSEG_CONFIG_CHECK(c.model.min_level == 3 && c.model.max_level == 7, at,
                      "model.min_level/max_level: the RetinaNet and EfficientDet networks produce P3-P7");
}

}  // namespace

void check_retinanet_config(const PipelineConfig& c, const std::string& at) {
  check_p3_to_p7(c, at);
  check_head_norm(c, at, c.model.fpn_channels);
}

void check_efficientdet_config(const PipelineConfig& c, const std::string& at) {
  check_p3_to_p7(c, at);
  check_head_norm(c, at, efficientdet_scaling(efficientdet_compound_coef(c.model.efficientdet)).bifpn_width);
  // BiFPN resamples levels by exact factors of 2; ResNet + FPN take any size, as in torchvision.
  DETSEG_CONFIG_CHECK(c.model.image_size % (int64_t(1) << c.model.max_level) == 0, at, "model.image_size (",
                      c.model.image_size, ") must be a multiple of 2^max_level = ", int64_t(1) << c.model.max_level,
                      " for EfficientDet");
}

void check_faster_rcnn_model_config(const PipelineConfig& c, const std::string& at) {
  check_head_norm(c, at, 0);
  check_box_loss_unused(c, at);
  check_faster_rcnn_config(c.model.faster_rcnn, /*masks=*/false, at);
}

void check_mask_rcnn_config(const PipelineConfig& c, const std::string& at) {
  check_head_norm(c, at, 0);
  check_box_loss_unused(c, at);
  check_faster_rcnn_config(c.model.faster_rcnn, /*masks=*/true, at);
}

void check_deeplabv3_config(const PipelineConfig& c, const std::string& at) {
  check_head_norm(c, at, 0);
  check_box_loss_unused(c, at);
  const int64_t os = c.model.deeplab.output_stride;
  DETSEG_CONFIG_CHECK(os == 8 || os == 16 || os == 32, at, "model.deeplab.output_stride: expected 8, 16 or 32, got ", os);
  const auto& weights = c.model.deeplab.class_weights;
  DETSEG_CONFIG_CHECK(weights.empty() || static_cast<int64_t>(weights.size()) == c.model.num_classes, at,
                      "model.deeplab.class_weights: one weight per class, ", c.model.num_classes, " (model.num_classes), got ",
                      weights.size());
}

void check_deeplabv3plus_config(const PipelineConfig& c, const std::string& at) {
  check_deeplabv3_config(c, at);
  DETSEG_CONFIG_CHECK(!c.model.deeplab.head_conv || c.model.deeplab.low_level_channels == 0, at,
                      "model.deeplab.head_conv: deeplabv3 only (deeplabv3plus's decoder has its own 3x3 convs)");
}

}  // namespace detseg
