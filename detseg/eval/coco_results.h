// Implements: writing detections in COCO results format ([{image_id, category_id, bbox, score,
// segmentation?}]), the file test-dev submissions and `detseg coco-eval --dt` take.
#pragma once

#include <string>
#include <vector>

#include "detseg/data/readers/coco.h"

namespace detseg {

// bbox is written as COCO xywh; an RLE segmentation as {"size": [h, w], "counts": "<compressed>"}
// and polygons as given. Written atomically.
std::string coco_results_json(const std::vector<CocoAnnotation>& detections);
void write_coco_results(const std::vector<CocoAnnotation>& detections, const std::string& path);

}  // namespace detseg
