// Implements: PASCAL VOC AP (see voc_ap.h).
#include "detseg/eval/voc_ap.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <set>
#include <unordered_map>

#include "detseg/core/error.h"

namespace detseg {

double voc_ap(const std::vector<double>& rec, const std::vector<double>& prec, bool use_07_metric) {
  DETSEG_CHECK(rec.size() == prec.size(), "voc_ap: ", rec.size(), " recalls but ", prec.size(), " precisions");
  if (use_07_metric) {
    double ap = 0;
    for (int i = 0; i <= 10; ++i) {
      const double t = i * 0.1;  // numpy.arange(0., 1.1, 0.1)
      double p = 0;
      for (size_t j = 0; j < rec.size(); ++j)
        if (rec[j] >= t) p = std::max(p, prec[j]);
      ap += p / 11.;
    }
    return ap;
  }
  // Sentinels (0, 0) and (1, 0), precision made monotone from the right, then the sum of
  // rectangles where recall changes.
  std::vector<double> mrec(rec.size() + 2), mpre(prec.size() + 2);
  mrec.front() = 0;
  mrec.back() = 1;
  mpre.front() = 0;
  mpre.back() = 0;
  std::copy(rec.begin(), rec.end(), mrec.begin() + 1);
  std::copy(prec.begin(), prec.end(), mpre.begin() + 1);
  for (size_t i = mpre.size() - 1; i > 0; --i) mpre[i - 1] = std::max(mpre[i - 1], mpre[i]);
  double ap = 0;
  for (size_t i = 0; i + 1 < mrec.size(); ++i)
    if (mrec[i + 1] != mrec[i]) ap += (mrec[i + 1] - mrec[i]) * mpre[i + 1];
  return ap;
}

namespace {

double voc_iou(const double* d, const double* g, double one) {
  // Boxes are xywh; the devkit works on inclusive corners.
  const double dx2 = d[0] + d[2], dy2 = d[1] + d[3], gx2 = g[0] + g[2], gy2 = g[1] + g[3];
  const double iw = std::max(std::min(dx2, gx2) - std::max(d[0], g[0]) + one, 0.0);
  const double ih = std::max(std::min(dy2, gy2) - std::max(d[1], g[1]) + one, 0.0);
  const double inter = iw * ih;
  const double uni = (d[2] + one) * (d[3] + one) + (g[2] + one) * (g[3] + one) - inter;
  return inter / uni;
}

}  // namespace

VocEvalResult voc_evaluate(const CocoDataset& gt, const CocoDataset& dt, const VocEvalOptions& options) {
  const double one = options.plus_one ? 1.0 : 0.0;
  VocEvalResult out;
  std::unordered_map<int64_t, size_t> category_pos;
  for (const auto& c : gt.categories) {
    category_pos.emplace(c.id, out.category_ids.size());
    out.category_ids.push_back(c.id);
  }
  const size_t K = out.category_ids.size();
  // Ground truth per (category, image), and detections per category.
  std::vector<std::unordered_map<int64_t, std::vector<size_t>>> gt_by(K);
  std::vector<int64_t> positives(K, 0);
  const std::set<int64_t> images(options.image_ids.begin(), options.image_ids.end());
  for (size_t j = 0; j < gt.annotations.size(); ++j) {
    const auto& a = gt.annotations[j];
    if (!images.empty() && !images.count(a.image_id)) continue;
    const size_t k = category_pos.at(a.category_id);
    gt_by[k][a.image_id].push_back(j);
    positives[k] += !a.ignore;
  }
  std::vector<std::vector<size_t>> dt_by(K);
  for (size_t j = 0; j < dt.annotations.size(); ++j) {
    auto it = category_pos.find(dt.annotations[j].category_id);
    DETSEG_CHECK(it != category_pos.end(), "voc eval: detection ", j, " has category ",
                 dt.annotations[j].category_id, ", not in the ground truth");
    dt_by[it->second].push_back(j);
  }
  double sum = 0;
  int64_t counted = 0;
  for (size_t k = 0; k < K; ++k) {
    auto& dets = dt_by[k];
    std::stable_sort(dets.begin(), dets.end(),
                     [&](size_t a, size_t b) { return dt.annotations[a].score > dt.annotations[b].score; });
    std::unordered_map<size_t, bool> taken;
    std::vector<double> rec, prec;
    double tp = 0, fp = 0;
    for (size_t j : dets) {
      const auto& d = dt.annotations[j];
      double best = -std::numeric_limits<double>::infinity();
      int64_t best_g = -1;
      auto g_it = gt_by[k].find(d.image_id);
      if (g_it != gt_by[k].end())
        for (size_t g : g_it->second) {
          const double iou = voc_iou(d.bbox, gt.annotations[g].bbox, one);
          if (iou > best) {
            best = iou;
            best_g = static_cast<int64_t>(g);
          }
        }
      if (best_g >= 0 && best > options.iou_threshold) {
        if (gt.annotations[best_g].ignore) continue;  // difficult: neither true nor false positive
        bool& hit = taken[best_g];
        hit ? ++fp : ++tp;
        hit = true;
      } else {
        ++fp;
      }
      if (positives[k] == 0) continue;
      rec.push_back(tp / positives[k]);
      prec.push_back(tp / std::max(tp + fp, std::numeric_limits<double>::epsilon()));
    }
    if (positives[k] == 0) {
      out.ap.push_back(-1);
      continue;
    }
    out.ap.push_back(voc_ap(rec, prec, options.use_07_metric));
    sum += out.ap.back();
    ++counted;
  }
  out.mean_ap = counted ? sum / counted : -1;
  return out;
}

VocEvaluator::VocEvaluator(const CocoDataset& ground_truth, VocEvalOptions options)
    : collected_(ground_truth, CocoEvaluatorOptions{CocoEvalParams(), false, /*metrics=*/false, false}),
      gt_(ground_truth),
      options_(std::move(options)) {}

void VocEvaluator::reset() { collected_.reset(); }
void VocEvaluator::process(const EvalSample& sample) { collected_.process(sample); }
std::string VocEvaluator::shard_state() const { return collected_.shard_state(); }
void VocEvaluator::merge_shard_state(const std::string& state) { collected_.merge_shard_state(state); }

Metrics VocEvaluator::summarize() {
  Metrics m = collected_.summarize();  // the results file; no COCO metrics
  VocEvalOptions options = options_;
  if (options.image_ids.empty()) options.image_ids.assign(collected_.images().begin(), collected_.images().end());
  const VocEvalResult r = voc_evaluate(gt_, coco_results_from(collected_.detections(), gt_), options);
  m.values = {{"mAP", r.mean_ap}};
  m.per_class.clear();
  m.json = nlohmann::ordered_json::object();
  m.json["mAP"] = r.mean_ap;
  m.json["iou_threshold"] = options.iou_threshold;
  m.json["use_07_metric"] = options.use_07_metric;
  m.json["per_category_ap"] = nlohmann::ordered_json::object();
  m.text = str(" VOC mAP@", options.iou_threshold, options.use_07_metric ? " (11-point)" : " (all-point)", " = ",
               r.mean_ap, "\n");
  for (size_t k = 0; k < r.ap.size(); ++k) {
    if (r.ap[k] < 0) continue;
    auto it = gt_.category_index.find(r.category_ids[k]);
    const std::string name = it == gt_.category_index.end() ? std::to_string(r.category_ids[k])
                                                           : gt_.categories[static_cast<size_t>(it->second)].name;
    m.per_class.emplace_back("AP/" + name, r.ap[k]);
    m.json["per_category_ap"][name] = r.ap[k];
    char line[160];
    std::snprintf(line, sizeof(line), " %-28s %7.3f\n", name.c_str(), r.ap[k]);
    m.text += line;
  }
  return m;
}

}  // namespace detseg
