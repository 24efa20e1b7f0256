// Implements: build_detector(config): the one place a config's model section becomes a network.
// An explicit switch over model.type, no registry.
#pragma once

#include <memory>

#include "detseg/config/config.h"
#include "detseg/models/detector.h"

namespace detseg {

std::shared_ptr<DetectorImpl> build_detector(const PipelineConfig& config);

// Whether the model trains on and predicts instance masks (mask_rcnn): the data pipeline then
// carries them and evaluation adds COCO segm metrics.
inline bool uses_instance_masks(const ModelConfig& model) { return model.type == "mask_rcnn"; }

}  // namespace detseg
