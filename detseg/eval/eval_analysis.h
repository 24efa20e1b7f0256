// Implements: the numbers behind the evaluation pictures (torch- and OpenCV-free; viz/eval_pictures
// draws them): per-class precision-recall curves read off COCO's accumulated precision array, AP per
// object size, score-threshold sweeps for TensorBoard's PR-curve plugin, the detection confusion
// matrix in Ultralytics' layout with the images the model gets most wrong, and semantic
// segmentation's pixel confusion matrix.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "detseg/eval/coco_eval.h"

namespace detseg {

struct AnalysisOptions {
  // The confusion matrix and the gallery count a detection scoring at least this (Ultralytics'
  // ConfusionMatrix default conf 0.25), matched to ground truth of IoU >= this (COCO's AP50 rule;
  // Ultralytics' default is IoU > 0.45).
  double score_threshold = 0.25;
  double iou_threshold = 0.5;
  int64_t gallery_images = 8;  // the images with the most false positives + misses
  int64_t num_thresholds = 101;  // score thresholds of the TensorBoard sweep: 0, 0.01, ..., 1
};

// One category's curves. precision50 and precision have one value per recall threshold (COCO's
// 101), area "all", the last max_dets (100): precision50 is cocoEval.eval['precision'][t=0.5, :, k,
// 0, -1]; precision its mean over the IoU thresholds 0.5:0.95. Both are empty without ground truth.
struct ClassCurves {
  std::string name;
  int64_t category_id = 0;
  int64_t num_truth = 0;  // ground truth that counts (not crowd)
  double ap = -1;         // mean of precision (= the printed AP/<name>); -1 without ground truth
  double ap50 = -1;       // mean of precision50 (= the printed AP50/<name>)
  std::array<double, 3> ap_by_size{-1, -1, -1};  // small, medium, large (AP 0.5:0.95; -1: none that size)
  std::vector<double> precision50, precision;
  // TensorBoard's PR-curve data at IoU 0.5 (the matches COCO's evaluation made): at score
  // threshold i / (num_thresholds - 1), the detections at or above it (bucketed as TensorBoard's
  // pr_curve summary does, floor(score * (n - 1))) that are true (tp) or false (fp) positives;
  // a detection matched to a crowd region counts as neither.
  std::vector<double> sweep_tp, sweep_fp;
};

// Detections against ground truth in Ultralytics' layout: rows are predicted classes, columns true
// classes, the last row and column "background": a column's background row counts the objects
// missed, a row's background column the false alarms.
struct DetectionConfusion {
  double score_threshold = 0.25, iou_threshold = 0.5;
  std::vector<std::string> names;  // the classes (category id order), then "background"
  std::vector<int64_t> counts;     // [names.size() (predicted), names.size() (true)]
  int64_t size() const { return static_cast<int64_t>(names.size()); }
  int64_t at(int64_t predicted, int64_t truth) const { return counts[predicted * size() + truth]; }
};

// One image's matching, Ultralytics' ConfusionMatrix.process_batch: detections scoring at least
// the threshold; every pair of IoU >= the threshold, whatever the classes; each detection keeps its
// best ground truth, then each ground truth its best detection among those. Crowd ground truth
// takes no part, and a detection lying in a crowd region (intersection over its own area >= the
// IoU threshold) is not a false alarm.
struct ImageMatching {
  std::vector<int64_t> truth;       // ground-truth annotation positions (not crowd), file order
  std::vector<int64_t> detections;  // detection positions scoring at least the threshold, file order
  std::vector<int64_t> truth_match;      // per ground truth: index into `detections`, or -1
  std::vector<int64_t> detection_match;  // per detection: index into `truth`, or -1
  std::vector<uint8_t> in_crowd;         // per detection: unmatched but inside a crowd region
};
ImageMatching match_image(const CocoDataset& gt, const std::vector<int64_t>& truth_positions,
                          const std::vector<CocoAnnotation>& detections,
                          const std::vector<int64_t>& detection_positions, const AnalysisOptions& options);

struct GalleryBox {
  int64_t k = 0;  // class index (confusion order)
  double bbox[4] = {0, 0, 0, 0};  // x, y, w, h in image pixels
  double score = 1;
  bool error = false;  // ground truth: missed; detection: a false positive (unmatched, or another class)
};

struct GalleryImage {
  int64_t image_id = 0;
  std::string file_name;
  int64_t false_positives = 0, misses = 0;
  std::vector<GalleryBox> truth, detections;  // detections: those scoring at least the threshold
};

struct EvalAnalysis {
  AnalysisOptions options;
  // Whether the PNG pictures are wanted (detseg eval, the final evaluation); TensorBoard's curves
  // are written for every evaluation.
  bool render = true;

  // Detection (COCO evaluator): the evaluation's categories in id order (class-agnostic: one
  // entry, "all classes").
  std::vector<double> recall_thresholds;
  std::vector<ClassCurves> classes;
  DetectionConfusion confusion;
  std::vector<GalleryImage> gallery;  // most errors first (ties: smaller image id first)
  std::string image_dir;              // the gallery's file names are relative to it (set by the engine)

  // Semantic segmentation: pixel counts [ground truth, predicted] over `pixel_classes`.
  std::vector<std::string> pixel_classes;
  std::vector<int64_t> pixel_counts;

  bool has_detection() const { return !classes.empty(); }
  bool has_segmentation() const { return !pixel_classes.empty(); }
};

// AP over the IoU thresholds [t_first, t_last) for area range `a`, the last max_dets, per category
// (pycocotools' statistic restricted to one category): -1 where it has no ground truth.
std::vector<double> coco_category_ap(const CocoEvalResult& result, int64_t t_first, int64_t t_last, int64_t a);

// Everything above for the COCO evaluator: `result` from coco_evaluate with keep_matches over
// `detections` (its dt dataset's annotations in this order) and the processed `image_ids`.
EvalAnalysis analyze_detections(const CocoDataset& gt, const std::vector<CocoAnnotation>& detections,
                                const std::vector<int64_t>& image_ids, const CocoEvalResult& result,
                                const AnalysisOptions& options = {});

// The confusion matrix alone (what analyze_detections fills in), and each image's error count.
DetectionConfusion detection_confusion(const CocoDataset& gt, const std::vector<CocoAnnotation>& detections,
                                       const std::vector<int64_t>& image_ids,
                                       const std::vector<int64_t>& category_ids, const AnalysisOptions& options,
                                       std::vector<GalleryImage>* images = nullptr);

// The files' contents: pr_curves.json, confusion_matrix.json, ap_by_size.json, gallery.json,
// pixel_confusion_matrix.json.
nlohmann::ordered_json pr_curves_json(const EvalAnalysis& analysis);
nlohmann::ordered_json confusion_json(const DetectionConfusion& confusion);
nlohmann::ordered_json ap_by_size_json(const EvalAnalysis& analysis);
nlohmann::ordered_json gallery_json(const EvalAnalysis& analysis);
nlohmann::ordered_json pixel_confusion_json(const EvalAnalysis& analysis);

}  // namespace detseg
