// Implements: turning a config's input section into a dataset and a loader: the reader chosen by
// format, the box policy, and the augmentation/resize the model needs.
#pragma once

#include <memory>

#include "detseg/config/config.h"
#include "detseg/data/dataset.h"
#include "detseg/data/loader.h"

namespace detseg {

// Reads the annotations (COCO JSON or VOC folder) and checks the boxes per input.box_policy.
// with_masks rasterises instance masks into the examples (Mask R-CNN).
std::shared_ptr<DetectionDataset> make_detection_dataset(const InputConfig& input, bool training,
                                                         bool with_masks = false);

// Loader options for `input`: training shuffles and augments (flip, scale jitter) forever;
// evaluation keeps order, resizes keeping the aspect, and runs one epoch.
LoaderOptions make_loader_options(const PipelineConfig& config, const InputConfig& input, bool training,
                                  int64_t batch_size, int64_t input_size);

}  // namespace detseg
