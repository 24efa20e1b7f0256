// Implements: build_detector(config): the one place a config's model section becomes a network.
// An explicit switch over model.type, no registry.
#pragma once

#include <memory>

#include "detseg/config/config.h"
#include "detseg/models/detector.h"

namespace detseg {

std::shared_ptr<DetectorImpl> build_detector(const PipelineConfig& config);

}  // namespace detseg
