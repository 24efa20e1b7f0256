// Implements: turning a config's input section into a dataset and a loader: the reader chosen by
// format (detection: COCO/VOC with the box policy; segmentation: image + label-PNG folders), and
// the augmentation/resize the model needs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "detseg/config/config.h"
#include "detseg/data/dataset.h"
#include "detseg/data/loader.h"

namespace detseg {

// Reads the annotations (COCO JSON, VOC folder or YOLO data.yaml) and checks the boxes per
// input.box_policy. with_masks rasterises instance masks into the examples (Mask R-CNN). Classes
// are matched by name: input.label_map (COCO, VOC, YOLO) renames a COCO category by its id,
// refuses a class it does not list, and orders the labels; `class_order` (a model's classes)
// orders them instead when given (DetectionDatasetOptions::class_order).
std::shared_ptr<DetectionDataset> make_detection_dataset(const InputConfig& input, bool training,
                                                         bool with_masks = false,
                                                         const std::vector<std::string>& class_order = {});

// format seg_folder: images from input.images, label PNGs (same stem) from input.annotations,
// values >= num_classes rejected unless listed in input.void_values; at most input.max_images.
std::shared_ptr<SegmentationDataset> make_segmentation_dataset(const InputConfig& input, int64_t num_classes);

// What the loader and the trainer need of a dataset, whichever kind the model takes.
struct InputData {
  int64_t size = 0;                      // examples
  Loader::LoadFn load;                   // un-augmented example i, thread-safe
  int64_t num_classes = 0;
  std::vector<std::string> class_names;  // label order
  std::vector<int64_t> category_ids;     // detection: the file's category id per label (-1: none); else empty
  std::shared_ptr<DetectionDataset> detection;        // set for detection models
  std::shared_ptr<SegmentationDataset> segmentation;  // set for segmentation models
};

// The dataset of `input` for config.model.type (detector or segmenter). `model_classes`: the
// model's class names in label order (its checkpoint's), to which the data's categories are matched
// by name; empty: the data's own order (a new model).
InputData make_input_data(const PipelineConfig& config, const InputConfig& input, bool training,
                          const std::vector<std::string>& model_classes = {});

// Loader options for `input`. Detectors: training shuffles and augments (flip, scale jitter)
// forever; evaluation keeps order, resizes keeping the aspect, and runs one epoch; model.resizer
// keep_aspect pads each batch to its largest image instead of an image_size square. Segmenters:
// training takes DeepLab's random scale (scale_min..scale_max by model.deeplab.scale_step), a
// crop of input_size padded with the ignore label, and the flip; evaluation keeps full resolution.
LoaderOptions make_loader_options(const PipelineConfig& config, const InputConfig& input, bool training,
                                  int64_t batch_size, int64_t input_size);

}  // namespace detseg
