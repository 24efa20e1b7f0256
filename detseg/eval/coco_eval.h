// Implements: COCO detection evaluation (iouType bbox and segm) with pycocotools' exact semantics:
// evaluate (per image and category matching), accumulate (precision/recall over 101 recall
// points) and summarize (the 12 stats). Multi-threaded, torch-free.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "detseg/data/readers/coco.h"

namespace detseg {

enum class CocoIouType { kBbox, kSegm };

// pycocotools' Params. Empty image/category lists mean "every one in the ground truth".
struct CocoEvalParams {
  CocoIouType iou_type = CocoIouType::kBbox;
  std::vector<int64_t> image_ids;
  std::vector<int64_t> category_ids;
  std::vector<double> iou_thresholds;     // default: numpy linspace(.5, .95, 10)
  std::vector<double> recall_thresholds;  // default: numpy linspace(0, 1, 101)
  std::vector<int64_t> max_dets = {1, 10, 100};
  std::vector<std::array<double, 2>> area_ranges = {
      {0, 1e10}, {0, 32 * 32}, {32 * 32, 96 * 96}, {96 * 96, 1e10}};
  std::vector<std::string> area_labels = {"all", "small", "medium", "large"};
  bool use_categories = true;  // false: class-agnostic (pycocotools useCats=0)
  // Also return what matching made of each detection (CocoEvalResult::match_*), for the
  // evaluation pictures; off by default since it costs memory on large sets.
  bool keep_matches = false;

  CocoEvalParams();
};

// numpy.linspace(start, stop, num) to the last bit (pycocotools' thresholds come from it).
std::vector<double> numpy_linspace(double start, double stop, int64_t num);

// What accumulate() produces, in numpy's C order (but its per-threshold scores, which no
// statistic reads).
struct CocoEvalResult {
  CocoEvalParams params;          // as used: ids sorted and unique, max_dets sorted
  int64_t T = 0, R = 0, K = 0, A = 0, M = 0;
  std::vector<double> precision;  // [T, R, K, A, M], -1 where a category has no ground truth
  std::vector<double> recall;     // [T, K, A, M]
  std::array<double, 12> stats{};
  // AP over IoU .50:.95, area "all", the last max_dets, per category in params.category_ids
  // order; -1 where the category has no ground truth (empty in class-agnostic mode).
  std::vector<double> per_category_ap;
  std::vector<double> per_category_ap50;  // the same at IoU 0.5 (empty when 0.5 is not a threshold)
  // With params.keep_matches: each detection that took part (the best max_dets.back() of its image
  // and category, as evaluateImg keeps them), for the area range "all" (else the first): its
  // position in the detections' dataset, its category index k (0 in class-agnostic mode) and its
  // flags per IoU threshold, [n, T]: kMatchTrue (matched to ground truth), kMatchIgnored (matched
  // to a crowd or out-of-range ground truth: neither true nor false), as accumulate() reads them.
  static constexpr uint8_t kMatchTrue = 1, kMatchIgnored = 2;
  std::vector<int64_t> match_detection;
  std::vector<int64_t> match_category;
  std::vector<uint8_t> match_flags;
  double seconds_evaluate = 0, seconds_accumulate = 0;

  double precision_at(int64_t t, int64_t r, int64_t k, int64_t a, int64_t m) const {
    return precision[(((t * R + r) * K + k) * A + a) * M + m];
  }
};

// evaluate + accumulate + summarize. `dt` comes from read_coco_results (or any CocoDataset whose
// annotations carry scores and areas as loadRes sets them). Uses `threads` workers (0: all cores).
CocoEvalResult coco_evaluate(const CocoDataset& gt, const CocoDataset& dt,
                             const CocoEvalParams& params = CocoEvalParams(), int threads = 0);

// The 12 stats from precision/recall, as pycocotools' summarize() computes them (means with
// numpy's pairwise summation). Needs at least 3 max_dets, like pycocotools.
std::array<double, 12> coco_summarize(const CocoEvalResult& result);

// pycocotools' 12 printed lines (" Average Precision  (AP) @[ IoU=0.50:0.95 | ... ] = 0.254").
std::string coco_summary_text(const CocoEvalResult& result);

// numpy's float64 sum (pairwise, 8-way unrolled blocks of 128) so means agree to the last bit.
double numpy_sum(const double* values, size_t n);

}  // namespace detseg
