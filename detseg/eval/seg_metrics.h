// Implements: semantic segmentation metrics from a confusion matrix: per-class IoU, mIoU, pixel
// accuracy, mean class accuracy, frequency-weighted IoU, with an ignore label. Torch-free.
//
// mIoU conventions differ on classes that never appear: DeepLab (tf.metrics.mean_iou) and
// mmsegmentation average over classes whose union (ground truth + predicted pixels) is non-zero;
// detectron2 averages over classes present in the ground truth. DeepLab's is the default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "detseg/eval/evaluator.h"

namespace detseg {

enum class MeanIouConvention {
  kNonEmptyUnion,        // DeepLab / mmsegmentation (default)
  kPresentInGroundTruth  // detectron2
};
const char* mean_iou_convention_name(MeanIouConvention convention);

struct ConfusionMatrix {
  ConfusionMatrix(int64_t num_classes, int64_t ignore_label = 255);
  // Adds n pixels. Ground-truth pixels equal to ignore_label are skipped; any other label outside
  // [0, num_classes) (in either map) is an Error naming the value.
  void add(const int32_t* ground_truth, const int32_t* predicted, int64_t n);
  void reset();
  int64_t at(int64_t gt, int64_t pred) const { return counts[gt * num_classes + pred]; }

  int64_t num_classes;
  int64_t ignore_label;
  std::vector<int64_t> counts;  // [num_classes (ground truth), num_classes (predicted)]
};

struct SegMetrics {
  MeanIouConvention convention = MeanIouConvention::kNonEmptyUnion;
  std::vector<double> iou;       // per class; NaN where the union is empty
  std::vector<double> accuracy;  // per class recall; NaN where the class is absent from ground truth
  double mean_iou = 0;           // over the classes the convention keeps (NaN if none)
  int64_t classes_in_mean = 0;
  double pixel_accuracy = 0;
  double mean_accuracy = 0;
  double frequency_weighted_iou = 0;
};

SegMetrics seg_metrics(const ConfusionMatrix& matrix,
                       MeanIouConvention convention = MeanIouConvention::kNonEmptyUnion);
// A readable report; `class_names` may be empty (class indices are printed).
std::string seg_metrics_text(const SegMetrics& metrics, const std::vector<std::string>& class_names = {});

class SemSegEvaluator : public Evaluator {
 public:
  SemSegEvaluator(int64_t num_classes, int64_t ignore_label = 255,
                  MeanIouConvention convention = MeanIouConvention::kNonEmptyUnion,
                  std::vector<std::string> class_names = {});
  void reset() override;
  void process(const EvalSample& sample) override;  // needs both label maps
  std::string shard_state() const override;          // the confusion matrix's counts
  void merge_shard_state(const std::string& state) override;
  // values mIoU, pixel_accuracy, mean_accuracy, fwIoU; per_class IoU/<class>; json the same with
  // "per_class_iou" (null where a class's union is empty).
  Metrics summarize() override;
  // The pixel confusion matrix (its counts and class names), for the evaluation pictures.
  std::shared_ptr<EvalAnalysis> analysis() const override;
  const ConfusionMatrix& matrix() const { return matrix_; }

 private:
  ConfusionMatrix matrix_;
  MeanIouConvention convention_;
  std::vector<std::string> class_names_;
};

}  // namespace detseg
