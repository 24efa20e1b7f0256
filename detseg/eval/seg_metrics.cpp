// Implements: semantic segmentation metrics (see seg_metrics.h).
#include "detseg/eval/seg_metrics.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "detseg/core/error.h"
#include "detseg/eval/eval_analysis.h"

namespace detseg {

const char* mean_iou_convention_name(MeanIouConvention convention) {
  return convention == MeanIouConvention::kNonEmptyUnion
             ? "mean over classes with a non-empty union (DeepLab/mmsegmentation)"
             : "mean over classes present in the ground truth (detectron2)";
}

ConfusionMatrix::ConfusionMatrix(int64_t n, int64_t ignore)
    : num_classes(n), ignore_label(ignore), counts(static_cast<size_t>(n * n), 0) {
  DETSEG_CONFIG_CHECK(n > 0, "confusion matrix: num_classes must be positive, got ", n);
}

void ConfusionMatrix::reset() { std::fill(counts.begin(), counts.end(), 0); }

void ConfusionMatrix::add(const int32_t* gt, const int32_t* pred, int64_t n) {
  const int64_t C = num_classes;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t g = gt[i];
    if (g == ignore_label) continue;
    const int64_t p = pred[i];
    if (static_cast<uint64_t>(g) >= static_cast<uint64_t>(C) || static_cast<uint64_t>(p) >= static_cast<uint64_t>(C)) {
      DETSEG_CHECK(g >= 0 && g < C, "confusion matrix: ground-truth label ", g, " at pixel ", i,
                   " is outside [0, ", C, ") and is not the ignore label ", ignore_label);
      DETSEG_CHECK(false, "confusion matrix: predicted label ", p, " at pixel ", i, " is outside [0, ", C, ")");
    }
    ++counts[g * C + p];
  }
}

SegMetrics seg_metrics(const ConfusionMatrix& m, MeanIouConvention convention) {
  const int64_t C = m.num_classes;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  SegMetrics out;
  out.convention = convention;
  out.iou.assign(C, nan);
  out.accuracy.assign(C, nan);
  std::vector<double> gt_total(C, 0), pred_total(C, 0), tp(C, 0);
  double total = 0, correct = 0;
  for (int64_t g = 0; g < C; ++g)
    for (int64_t p = 0; p < C; ++p) {
      const double v = static_cast<double>(m.at(g, p));
      gt_total[g] += v;
      pred_total[p] += v;
      total += v;
      if (g == p) {
        tp[g] = v;
        correct += v;
      }
    }
  double iou_sum = 0, acc_sum = 0, fw = 0;
  int64_t acc_count = 0;
  for (int64_t c = 0; c < C; ++c) {
    const double uni = gt_total[c] + pred_total[c] - tp[c];
    if (uni > 0) out.iou[c] = tp[c] / uni;
    if (gt_total[c] > 0) {
      out.accuracy[c] = tp[c] / gt_total[c];
      acc_sum += out.accuracy[c];
      ++acc_count;
      fw += gt_total[c] / total * out.iou[c];
    }
    const bool keep = convention == MeanIouConvention::kNonEmptyUnion ? uni > 0 : gt_total[c] > 0;
    if (keep) {
      iou_sum += out.iou[c];
      ++out.classes_in_mean;
    }
  }
  out.mean_iou = out.classes_in_mean ? iou_sum / out.classes_in_mean : nan;
  out.mean_accuracy = acc_count ? acc_sum / acc_count : nan;
  out.pixel_accuracy = total > 0 ? correct / total : nan;
  out.frequency_weighted_iou = total > 0 ? fw : nan;
  return out;
}

std::string seg_metrics_text(const SegMetrics& s, const std::vector<std::string>& names) {
  std::string out;
  char line[200];
  std::snprintf(line, sizeof(line), "mIoU %.4f (%s; %lld classes)\npixel accuracy %.4f, mean accuracy %.4f, fwIoU %.4f\n",
                s.mean_iou, mean_iou_convention_name(s.convention), static_cast<long long>(s.classes_in_mean),
                s.pixel_accuracy, s.mean_accuracy, s.frequency_weighted_iou);
  out += line;
  for (size_t c = 0; c < s.iou.size(); ++c) {
    const std::string name = c < names.size() ? names[c] : std::to_string(c);
    if (std::isnan(s.iou[c]))
      std::snprintf(line, sizeof(line), "  %-20s IoU   n/a (absent)\n", name.c_str());
    else
      std::snprintf(line, sizeof(line), "  %-20s IoU %.4f\n", name.c_str(), s.iou[c]);
    out += line;
  }
  return out;
}

SemSegEvaluator::SemSegEvaluator(int64_t num_classes, int64_t ignore_label, MeanIouConvention convention,
                                 std::vector<std::string> class_names)
    : matrix_(num_classes, ignore_label), convention_(convention), class_names_(std::move(class_names)) {}

void SemSegEvaluator::reset() { matrix_.reset(); }

void SemSegEvaluator::process(const EvalSample& sample) {
  DETSEG_CHECK(sample.predicted_labels && sample.ground_truth_labels && sample.height >= 0 && sample.width >= 0,
               "semantic segmentation evaluator: image ", sample.image_id, " came without both label maps");
  matrix_.add(sample.ground_truth_labels, sample.predicted_labels, sample.height * sample.width);
}

std::string SemSegEvaluator::shard_state() const { return nlohmann::json(matrix_.counts).dump(); }

void SemSegEvaluator::merge_shard_state(const std::string& state) {
  const auto counts = nlohmann::json::parse(state).get<std::vector<int64_t>>();
  DETSEG_CHECK(counts.size() == matrix_.counts.size(), "semantic segmentation evaluator: a shard's confusion matrix has ",
               counts.size(), " cells, expected ", matrix_.counts.size());
  for (size_t i = 0; i < counts.size(); ++i) matrix_.counts[i] += counts[i];
}

Metrics SemSegEvaluator::summarize() {
  SegMetrics s = seg_metrics(matrix_, convention_);
  auto number_or_null = [](double x) { return std::isfinite(x) ? nlohmann::ordered_json(x) : nlohmann::ordered_json(nullptr); };
  Metrics m;
  m.values = {{"mIoU", s.mean_iou},
              {"pixel_accuracy", s.pixel_accuracy},
              {"mean_accuracy", s.mean_accuracy},
              {"fwIoU", s.frequency_weighted_iou}};
  for (const auto& [name, value] : m.values) m.json[name] = number_or_null(value);
  m.json["per_class_iou"] = nlohmann::ordered_json::object();
  for (size_t c = 0; c < s.iou.size(); ++c) {
    const std::string name = c < class_names_.size() ? class_names_[c] : std::to_string(c);
    m.per_class.emplace_back("IoU/" + name, s.iou[c]);
    m.json["per_class_iou"][name] = number_or_null(s.iou[c]);
  }
  m.text = seg_metrics_text(s, class_names_);
  return m;
}

std::shared_ptr<EvalAnalysis> SemSegEvaluator::analysis() const {
  auto analysis = std::make_shared<EvalAnalysis>();
  for (int64_t c = 0; c < matrix_.num_classes; ++c)
    analysis->pixel_classes.push_back(c < static_cast<int64_t>(class_names_.size()) ? class_names_[c] : std::to_string(c));
  analysis->pixel_counts = matrix_.counts;
  return analysis;
}

}  // namespace detseg
