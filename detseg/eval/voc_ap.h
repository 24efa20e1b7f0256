// Implements: PASCAL VOC detection AP (the devkit's voc_eval semantics): greedy matching by score
// at an IoU threshold with "difficult" ground truth neither hit nor missed, and AP as the 11-point
// (VOC2007) or all-point (VOC2010+) area under the interpolated precision/recall curve.
#pragma once

#include <cstdint>
#include <vector>

#include "detseg/data/readers/coco.h"

namespace detseg {

// AP of a precision/recall curve (recall ascending). 11-point: mean over t = 0, .1, ..., 1 of the
// best precision at recall >= t. All-point: area under the monotone precision envelope.
double voc_ap(const std::vector<double>& recall, const std::vector<double>& precision, bool use_07_metric);

struct VocEvalOptions {
  double iou_threshold = 0.5;
  bool use_07_metric = false;  // 11-point interpolation (VOC2007 test)
  bool plus_one = true;        // the devkit's inclusive-pixel box sizes (x2 - x1 + 1)
};

struct VocEvalResult {
  std::vector<int64_t> category_ids;  // ground truth's categories, in its order
  std::vector<double> ap;             // per category; -1 where it has no non-difficult ground truth
  double mean_ap = -1;                // over categories with ap >= 0
};

// Ground truth "difficult" is CocoAnnotation::ignore (the VOC reader maps it there).
VocEvalResult voc_evaluate(const CocoDataset& gt, const CocoDataset& dt, const VocEvalOptions& options = {});

}  // namespace detseg
