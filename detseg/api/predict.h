// Implements: running a trained model on image files. Detectors: detections as JSON (COCO results
// form plus file and class names) and the images with boxes, class names and scores drawn.
// Segmenters: colour label maps, overlays and class-id PNGs, plus segmentation.json.
#pragma once

#include <string>

#include "detseg/config/config.h"

namespace detseg {

struct PredictOptions {
  std::string checkpoint;
  std::string input;   // an image file or a folder of .jpg/.jpeg/.png
  // Folder: detections.json / segmentation.json, images.json (each image's id) and the pictures,
  // named after the input's whole file name (a.jpg -> a.jpg.png), so no two inputs share one.
  std::string output;
  double score_threshold = 0.3;  // drawing threshold; the JSON keeps every detection
};

// Returns the number of images processed.
int64_t predict_images(const PipelineConfig& config, const PredictOptions& options);

}  // namespace detseg
