// Implements: tiled (sliced) detection of one large image: cut into overlapping tiles
// (postprocess/tiling.h), each tile run through a detector in batches, the detections mapped back to
// the image's pixels and merged so that each object appears once; optionally the whole image too,
// resized as without tiles, for objects larger than a tile. `detseg predict --tile` runs it with the
// model; tests run it with a fake detector.
#pragma once

#include <opencv2/core.hpp>

#include <cstdint>
#include <functional>
#include <vector>

#include "detseg/api/inference.h"

namespace detseg {

struct PipelineConfig;

struct TilingOptions {
  int64_t tile_size = 0;  // pixels, square; 0: no tiling
  double overlap = 0.2;   // of a tile, in [0, 0.9]
  bool include_full_image = true;
  double iou_threshold = 0.5;    // NMS among whole detections (postprocess.nms_iou_threshold)
  double match_threshold = 0.5;  // joining cut pieces (postprocess/tiling.h)
};

// postprocess.tile_size, tile_overlap, tile_include_full_image and nms_iou_threshold.
TilingOptions tiling_options(const PipelineConfig& config);

// Detections for each image of a batch, in that image's pixels (Detector::detect_batch).
using DetectBatch = std::function<std::vector<std::vector<Detection>>(const std::vector<cv::Mat>&)>;

// The detections of `image` (8-bit BGR), in its pixels, by decreasing score. The tiles go to
// `detect` `batch` at a time. Detections keep the fields `detect` gave (class, names); a joined
// group takes those of its best-scoring piece and the union of the pieces' boxes. Masks are not
// tiled: a detection with a mask is an error.
std::vector<Detection> detect_tiled(const cv::Mat& image, const TilingOptions& options, int64_t batch,
                                    const DetectBatch& detect);

}  // namespace detseg
