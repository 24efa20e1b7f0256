// Implements: `detseg export`: a trained checkpoint's weights (its EMA averages when it has them)
// as a file other tools load. safetensors now: detseg's parameter names are torchvision's for the
// architectures torchvision has (RetinaNet, Faster/Mask R-CNN with ResNet + FPN), so the file loads
// with load_state_dict(strict=True) into the matching torchvision model.
#pragma once

#include <cstdint>
#include <string>

#include "detseg/config/config.h"

namespace detseg {

struct ExportOptions {
  std::string checkpoint;
  std::string format = "safetensors";
  std::string output;
};

struct ExportResult {
  int64_t step = 0;
  int64_t num_tensors = 0;
  int64_t num_values = 0;  // elements over every tensor
};

ExportResult export_model(const PipelineConfig& config, const ExportOptions& options);

}  // namespace detseg
