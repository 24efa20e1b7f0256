// Implements: a config's model section as a model: build_model through model.type's builder in the
// part table (config/parts.def, models/registry.h), build_detector / build_segmenter for callers
// that need the kind; and what else a model type adds to training (gradient multipliers, fine-tune
// exclusions, how pretrained weights load).
#pragma once

#include <memory>
#include <string>

#include "detseg/config/config.h"
#include "detseg/models/detector.h"
#include "detseg/models/segmenter.h"
#include "detseg/train/optimizer_options.h"

namespace detseg {

struct DenseDetectorOptions;  // models/meta_archs/dense_detector.h

// The dense (one-stage) detector's settings from a config: anchors (model.min_level..max_level,
// num_scales, aspect_ratios, anchor_scale), the labeler's thresholds, the focal and box losses,
// postprocess. RetinaNet and EfficientDet are built on it; so is a new dense model
// (docs/architecture.md, "Add a model").
DenseDetectorOptions dense_detector_options(const PipelineConfig& config);

// model.type is a semantic-segmentation meta-architecture (its part-table kind is segmenter).
bool is_segmentation_model(const PipelineConfig& config);

std::shared_ptr<DetectorImpl> build_detector(const PipelineConfig& config);
std::shared_ptr<SegmenterImpl> build_segmenter(const PipelineConfig& config);
std::shared_ptr<ModelImpl> build_model(const PipelineConfig& config);

// Gradient multipliers the model type adds to train.gradient_multipliers (DeepLab: biases x2,
// last layers x model.deeplab.last_layer_gradient_multiplier); empty for detectors.
std::vector<GradientMultiplier> model_gradient_multipliers(const PipelineConfig& config);

// A regex of parameter names that fine-tuning must not load on top of train.fine_tune.exclude
// (DeepLab's last layers when initialize_last_layer is false); empty when none.
std::string model_fine_tune_exclude(const PipelineConfig& config);

// How model.pretrained (a torchvision ImageNet state dict at `file`) loads into the backbone: a
// classification fine-tune of the network torchvision's file holds (backbone.body.* for the
// ResNet + FPN/C4 detectors, whose FPN stays as initialised; backbone.* for DeepLab and
// EfficientDet) with that prefix removed to give torchvision's names, every one of those tensors
// required with its shape.
FineTuneOptions pretrained_fine_tune_options(const PipelineConfig& config, const std::string& file);

// Whether the model trains on and predicts instance masks (its part-table line says so: mask_rcnn):
// the data pipeline then carries them and evaluation adds COCO segm metrics.
bool uses_instance_masks(const ModelConfig& model);

}  // namespace detseg
