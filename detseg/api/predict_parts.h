// Implements: the pieces `detseg predict`'s image path (api/predict.cpp) and video path
// (api/predict_video.cpp) share: running the detector on a batch (or tiles), a detection's JSON,
// the drawing, and the check that no output replaces an input.
#pragma once

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

#include <string>
#include <vector>

#include "detseg/api/inference.h"
#include "detseg/api/predict.h"
#include "detseg/api/tiled_detect.h"
#include "detseg/core/files.h"

namespace detseg {

// The detections of each image: detect_batch on them all, or with tiling.tile_size > 0 each image
// in tiles, `batch` tiles per forward pass.
std::vector<std::vector<Detection>> detect_images(const Detector& detector, const std::vector<cv::Mat>& images,
                                                  const TilingOptions& tiling, int64_t batch);

// category_id, category_name, bbox (COCO x, y, w, h) and score, plus the mask as COCO RLE.
nlohmann::json detection_json(const Detection& detection);

// Draws the detections scoring at least the drawing threshold (boxes, masks) on `bgr`.
void draw_detections(cv::Mat& bgr, const std::vector<Detection>& detections, const PredictOptions& options);

// Refuses, before the model is loaded, outputs (file names in options.output) that would replace an
// input: the checkpoint, the config and its bases, the annotations, and `inputs` (what each is).
void check_predict_outputs(const PipelineConfig& config, const PredictOptions& options,
                           const std::vector<CommandInput>& inputs, const std::vector<std::string>& outputs);

// Detectors' --tile and --batch checks (one line each, ConfigError).
void check_detector_options(const PipelineConfig& config, const PredictOptions& options);

// Videos: detections.jsonl and annotated.mp4 in options.output (predict_video.cpp).
int64_t predict_video(const PipelineConfig& config, const PredictOptions& options);

}  // namespace detseg
