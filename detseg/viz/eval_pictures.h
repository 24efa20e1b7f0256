// Implements: the pictures of an evaluation (eval/eval_analysis.h holds their numbers): per-class
// precision-recall curves, the detection confusion matrix, AP by object size, a gallery of the
// images the model gets most wrong (ground truth and detections in two styles), semantic
// segmentation's normalised pixel confusion matrix; each PNG beside a JSON of the numbers drawn;
// and the PR curves as TensorBoard pr_curves summaries.
#pragma once

#include <opencv2/core.hpp>

#include <string>
#include <vector>

#include "detseg/eval/eval_analysis.h"
#include "detseg/io/tfevents.h"

namespace detseg {

// A matrix of shaded cells with their text: rows and columns named, a title and the axis names.
struct MatrixPicture {
  std::string title;
  std::string row_axis, column_axis;
  std::vector<std::string> row_names, column_names;
  std::vector<double> shade;      // [rows, columns] in [0, 1] (white to dark blue); NaN: grey (no data)
  std::vector<std::string> text;  // [rows, columns] written in each cell that fits it
};
cv::Mat render_matrix(const MatrixPicture& picture);

// The shading of a value in [0, 1] (BGR: white to matplotlib's Blues' darkest).
cv::Scalar shade_color(double value);

// The pictures' contents (what render_matrix draws for each).
MatrixPicture confusion_picture(const DetectionConfusion& confusion);  // shade: column-normalised counts
MatrixPicture ap_by_size_picture(const EvalAnalysis& analysis);
MatrixPicture pixel_confusion_picture(const EvalAnalysis& analysis);

// Precision against recall per class at IoU 0.5 (iou50) or the mean over 0.50:0.95, with "all
// classes" (their mean) in black; the legend gives each class's AP (the printed per-class value).
cv::Mat render_pr_curves(const EvalAnalysis& analysis, bool iou50);

// The gallery: analysis.gallery's images (read from analysis.image_dir), ground truth dashed,
// detections solid, the errors tagged ("missed" on ground truth no detection of its class found,
// "FP score" on false positives), a caption per image and a legend.
cv::Mat render_gallery(const EvalAnalysis& analysis);

// Writes `dir`/ (created): detection: pr_curves_iou50.png, pr_curves_iou50-95.png, pr_curves.json,
// confusion_matrix.png/.json, ap_by_size.png/.json, gallery.json and gallery.png (when an image
// has an error); segmentation: pixel_confusion_matrix.png/.json. Returns the paths written.
std::vector<std::string> write_eval_pictures(const EvalAnalysis& analysis, const std::string& dir);

// One class's TensorBoard PR curve: analysis' score sweep at IoU 0.5 with TensorBoard's own
// definitions (tn = fp at threshold 0 - fp, precision = tp / max(1e-7, tp + fp)), and fn the
// class's ground truth not found (num_truth - tp), so recall = tp / num_truth.
PrCurveData pr_curve_data(const ClassCurves& curves);

// Adds each class's curve with ground truth or detections as "<tag_prefix>pr_iou50/<class>".
void add_pr_curve_summaries(EventWriter& events, const EvalAnalysis& analysis, const std::string& tag_prefix,
                            int64_t step);

}  // namespace detseg
