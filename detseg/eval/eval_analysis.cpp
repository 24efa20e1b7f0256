// Implements: the evaluation pictures' numbers (see eval_analysis.h).
#include "detseg/eval/eval_analysis.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "detseg/core/error.h"
#include "detseg/data/readers/rle.h"

namespace detseg {
namespace {

std::string category_name(const CocoDataset& gt, int64_t id) {
  auto it = gt.category_index.find(id);
  return it == gt.category_index.end() || gt.categories[static_cast<size_t>(it->second)].name.empty()
             ? std::to_string(id)
             : gt.categories[static_cast<size_t>(it->second)].name;
}

int64_t area_index(const CocoEvalParams& p, const std::string& label) {
  for (size_t a = 0; a < p.area_labels.size(); ++a)
    if (p.area_labels[a] == label) return static_cast<int64_t>(a);
  return -1;
}

int64_t iou_index(const CocoEvalParams& p, double iou) {
  for (size_t t = 0; t < p.iou_thresholds.size(); ++t)
    if (std::abs(p.iou_thresholds[t] - iou) < 1e-9) return static_cast<int64_t>(t);
  return -1;
}

// Detection positions by image id.
std::unordered_map<int64_t, std::vector<int64_t>> detections_by_image(const std::vector<CocoAnnotation>& detections) {
  std::unordered_map<int64_t, std::vector<int64_t>> by_image;
  for (size_t j = 0; j < detections.size(); ++j) by_image[detections[j].image_id].push_back(static_cast<int64_t>(j));
  return by_image;
}

// The annotation positions of `image_id` whose category is in `index`.
std::vector<int64_t> truth_of(const CocoDataset& gt, int64_t image_id,
                              const std::unordered_map<int64_t, int64_t>& index) {
  std::vector<int64_t> out;
  auto it = gt.image_index.find(image_id);
  if (it == gt.image_index.end()) return out;
  for (int64_t j : gt.annotations_by_image[static_cast<size_t>(it->second)])
    if (index.count(gt.annotations[static_cast<size_t>(j)].category_id)) out.push_back(j);
  return out;
}

std::vector<int64_t> detections_of(const std::unordered_map<int64_t, std::vector<int64_t>>& by_image,
                                   int64_t image_id, const std::vector<CocoAnnotation>& detections,
                                   const std::unordered_map<int64_t, int64_t>& index) {
  std::vector<int64_t> out;
  auto it = by_image.find(image_id);
  if (it == by_image.end()) return out;
  for (int64_t j : it->second)
    if (index.count(detections[static_cast<size_t>(j)].category_id)) out.push_back(j);
  return out;
}

}  // namespace

std::vector<double> coco_category_ap(const CocoEvalResult& out, int64_t t_first, int64_t t_last, int64_t a) {
  // The values and their order are per_category_ap's in coco_eval.cpp, so the numbers agree to
  // the last bit with the printed per-class table.
  std::vector<double> aps, values;
  for (int64_t k = 0; k < out.K; ++k) {
    values.clear();
    for (int64_t t = t_first; t < t_last; ++t)
      for (int64_t r = 0; r < out.R; ++r) {
        const double v = out.precision_at(t, r, k, a, out.M - 1);
        if (v > -1) values.push_back(v);
      }
    aps.push_back(values.empty() ? -1.0 : numpy_sum(values.data(), values.size()) / values.size());
  }
  return aps;
}

ImageMatching match_image(const CocoDataset& gt, const std::vector<int64_t>& truth_positions,
                          const std::vector<CocoAnnotation>& detections,
                          const std::vector<int64_t>& detection_positions, const AnalysisOptions& options) {
  ImageMatching m;
  std::vector<int64_t> crowd;
  for (int64_t j : truth_positions) (gt.annotations[static_cast<size_t>(j)].iscrowd ? crowd : m.truth).push_back(j);
  for (int64_t j : detection_positions)
    if (detections[static_cast<size_t>(j)].score >= options.score_threshold) m.detections.push_back(j);
  const size_t G = m.truth.size(), D = m.detections.size();
  m.truth_match.assign(G, -1);
  m.detection_match.assign(D, -1);
  m.in_crowd.assign(D, 0);
  // Each detection's best ground truth (IoU >= threshold, any class; ties: the first).
  std::vector<int64_t> best(D, -1);
  std::vector<double> best_iou(D, -1);
  for (size_t d = 0; d < D; ++d) {
    const double* db = detections[static_cast<size_t>(m.detections[d])].bbox;
    for (size_t g = 0; g < G; ++g) {
      const double iou = box_iou_coco(db, gt.annotations[static_cast<size_t>(m.truth[g])].bbox, false);
      if (iou >= options.iou_threshold && iou > best_iou[d]) {
        best_iou[d] = iou;
        best[d] = static_cast<int64_t>(g);
      }
    }
  }
  // Then each ground truth keeps the best of the detections that chose it.
  for (size_t d = 0; d < D; ++d) {
    if (best[d] < 0) continue;
    const size_t g = static_cast<size_t>(best[d]);
    const int64_t held = m.truth_match[g];
    if (held < 0 || best_iou[d] > best_iou[static_cast<size_t>(held)]) m.truth_match[g] = static_cast<int64_t>(d);
  }
  for (size_t g = 0; g < G; ++g)
    if (m.truth_match[g] >= 0) m.detection_match[static_cast<size_t>(m.truth_match[g])] = static_cast<int64_t>(g);
  for (size_t d = 0; d < D; ++d) {
    if (m.detection_match[d] >= 0) continue;
    const double* db = detections[static_cast<size_t>(m.detections[d])].bbox;
    for (int64_t c : crowd)
      if (box_iou_coco(db, gt.annotations[static_cast<size_t>(c)].bbox, true) >= options.iou_threshold) {
        m.in_crowd[d] = 1;
        break;
      }
  }
  return m;
}

DetectionConfusion detection_confusion(const CocoDataset& gt, const std::vector<CocoAnnotation>& detections,
                                       const std::vector<int64_t>& image_ids,
                                       const std::vector<int64_t>& category_ids, const AnalysisOptions& options,
                                       std::vector<GalleryImage>* images) {
  DetectionConfusion c;
  c.score_threshold = options.score_threshold;
  c.iou_threshold = options.iou_threshold;
  std::unordered_map<int64_t, int64_t> index;
  for (size_t k = 0; k < category_ids.size(); ++k) {
    index.emplace(category_ids[k], static_cast<int64_t>(k));
    c.names.push_back(category_name(gt, category_ids[k]));
  }
  c.names.push_back("background");
  const int64_t K = static_cast<int64_t>(category_ids.size()), n = K + 1;
  c.counts.assign(static_cast<size_t>(n * n), 0);
  const auto by_image = detections_by_image(detections);
  for (int64_t image_id : image_ids) {
    const ImageMatching m = match_image(gt, truth_of(gt, image_id, index), detections,
                                        detections_of(by_image, image_id, detections, index), options);
    int64_t false_positives = 0, misses = 0;
    for (size_t g = 0; g < m.truth.size(); ++g) {
      const int64_t truth = index.at(gt.annotations[static_cast<size_t>(m.truth[g])].category_id);
      const int64_t d = m.truth_match[g];
      const int64_t predicted =
          d < 0 ? K : index.at(detections[static_cast<size_t>(m.detections[static_cast<size_t>(d)])].category_id);
      ++c.counts[static_cast<size_t>(predicted * n + truth)];
      if (predicted != truth) {
        ++misses;
        false_positives += d >= 0;  // a detection of another class on it
      }
    }
    for (size_t d = 0; d < m.detections.size(); ++d) {
      if (m.detection_match[d] >= 0 || m.in_crowd[d]) continue;
      ++c.counts[static_cast<size_t>(index.at(detections[static_cast<size_t>(m.detections[d])].category_id) * n + K)];
      ++false_positives;
    }
    if (images && false_positives + misses > 0) {
      GalleryImage image;
      image.image_id = image_id;
      image.false_positives = false_positives;
      image.misses = misses;
      images->push_back(std::move(image));
    }
  }
  return c;
}

EvalAnalysis analyze_detections(const CocoDataset& gt, const std::vector<CocoAnnotation>& detections,
                                const std::vector<int64_t>& image_ids, const CocoEvalResult& result,
                                const AnalysisOptions& options) {
  const CocoEvalParams& p = result.params;
  DETSEG_CHECK(p.keep_matches, "analyze_detections: the COCO evaluation must keep its matches");
  DETSEG_CHECK(options.num_thresholds >= 2, "analyze_detections: num_thresholds must be at least 2");
  EvalAnalysis analysis;
  analysis.options = options;
  analysis.recall_thresholds = p.recall_thresholds;
  const int64_t a_all = std::max<int64_t>(0, area_index(p, "all"));
  const int64_t t50 = iou_index(p, 0.5);
  const std::vector<double> ap = coco_category_ap(result, 0, result.T, a_all);
  const std::vector<double> ap50 = t50 >= 0 ? coco_category_ap(result, t50, t50 + 1, a_all) : std::vector<double>();
  std::array<std::vector<double>, 3> by_size;
  const char* const sizes[3] = {"small", "medium", "large"};
  for (int s = 0; s < 3; ++s) {
    const int64_t a = area_index(p, sizes[s]);
    if (a >= 0) by_size[s] = coco_category_ap(result, 0, result.T, a);
  }

  // Ground truth that counts, per category (pycocotools' npig for area "all").
  std::unordered_map<int64_t, int64_t> index;
  for (size_t k = 0; k < p.category_ids.size(); ++k) index.emplace(p.category_ids[k], static_cast<int64_t>(k));
  const std::unordered_set<int64_t> images(image_ids.begin(), image_ids.end());
  std::vector<int64_t> num_truth(static_cast<size_t>(result.K), 0);
  for (const CocoAnnotation& a : gt.annotations) {
    auto k = index.find(a.category_id);
    if (k == index.end() || !images.count(a.image_id) || a.iscrowd || a.area < p.area_ranges[a_all][0] ||
        a.area > p.area_ranges[a_all][1])
      continue;
    ++num_truth[static_cast<size_t>(p.use_categories ? k->second : 0)];
  }

  const int64_t N = options.num_thresholds;
  for (int64_t k = 0; k < result.K; ++k) {
    ClassCurves c;
    c.category_id = p.use_categories ? p.category_ids[static_cast<size_t>(k)] : 0;
    c.name = p.use_categories ? category_name(gt, c.category_id) : "all classes";
    c.num_truth = num_truth[static_cast<size_t>(k)];
    c.ap = ap[static_cast<size_t>(k)];
    if (!ap50.empty()) c.ap50 = ap50[static_cast<size_t>(k)];
    for (int s = 0; s < 3; ++s)
      if (!by_size[s].empty()) c.ap_by_size[s] = by_size[s][static_cast<size_t>(k)];
    if (c.ap > -1) {
      c.precision.assign(static_cast<size_t>(result.R), 0.0);
      for (int64_t r = 0; r < result.R; ++r) {
        double sum = 0;
        for (int64_t t = 0; t < result.T; ++t) sum += result.precision_at(t, r, k, a_all, result.M - 1);
        c.precision[static_cast<size_t>(r)] = sum / static_cast<double>(result.T);
      }
      if (t50 >= 0)
        for (int64_t r = 0; r < result.R; ++r)
          c.precision50.push_back(result.precision_at(t50, r, k, a_all, result.M - 1));
    }
    c.sweep_tp.assign(static_cast<size_t>(N), 0.0);
    c.sweep_fp.assign(static_cast<size_t>(N), 0.0);
    analysis.classes.push_back(std::move(c));
  }
  // The score sweep from the matches at IoU 0.5: bucket counts, then the reverse cumulative sum.
  if (t50 >= 0) {
    for (size_t i = 0; i < result.match_detection.size(); ++i) {
      const uint8_t f = result.match_flags[i * static_cast<size_t>(result.T) + static_cast<size_t>(t50)];
      if (f & CocoEvalResult::kMatchIgnored) continue;
      const double score = std::clamp(detections[static_cast<size_t>(result.match_detection[i])].score, 0.0, 1.0);
      const auto bucket = static_cast<size_t>(std::floor(score * static_cast<double>(N - 1)));
      ClassCurves& c = analysis.classes[static_cast<size_t>(result.match_category[i])];
      ++((f & CocoEvalResult::kMatchTrue) ? c.sweep_tp : c.sweep_fp)[bucket];
    }
    for (ClassCurves& c : analysis.classes)
      for (int64_t i = N - 2; i >= 0; --i) {
        c.sweep_tp[static_cast<size_t>(i)] += c.sweep_tp[static_cast<size_t>(i + 1)];
        c.sweep_fp[static_cast<size_t>(i)] += c.sweep_fp[static_cast<size_t>(i + 1)];
      }
  }

  std::vector<GalleryImage> worst;
  analysis.confusion = detection_confusion(gt, detections, image_ids, p.category_ids, options, &worst);
  std::stable_sort(worst.begin(), worst.end(), [](const GalleryImage& a, const GalleryImage& b) {
    const int64_t ea = a.false_positives + a.misses, eb = b.false_positives + b.misses;
    return ea != eb ? ea > eb : a.image_id < b.image_id;
  });
  if (static_cast<int64_t>(worst.size()) > options.gallery_images) worst.resize(static_cast<size_t>(options.gallery_images));
  // The chosen images' boxes, matched again (a few images: cheaper than keeping every image's).
  const auto by_image = detections_by_image(detections);
  for (GalleryImage& image : worst) {
    image.file_name = gt.images[static_cast<size_t>(gt.image_index.at(image.image_id))].file_name;
    const ImageMatching m = match_image(gt, truth_of(gt, image.image_id, index), detections,
                                        detections_of(by_image, image.image_id, detections, index), options);
    auto k_of = [&](int64_t category_id) { return index.at(category_id); };
    for (size_t g = 0; g < m.truth.size(); ++g) {
      const CocoAnnotation& a = gt.annotations[static_cast<size_t>(m.truth[g])];
      GalleryBox b;
      b.k = k_of(a.category_id);
      std::copy(a.bbox, a.bbox + 4, b.bbox);
      const int64_t d = m.truth_match[g];
      b.error = d < 0 || k_of(detections[static_cast<size_t>(m.detections[static_cast<size_t>(d)])].category_id) != b.k;
      image.truth.push_back(b);
    }
    for (size_t d = 0; d < m.detections.size(); ++d) {
      const CocoAnnotation& a = detections[static_cast<size_t>(m.detections[d])];
      GalleryBox b;
      b.k = k_of(a.category_id);
      std::copy(a.bbox, a.bbox + 4, b.bbox);
      b.score = a.score;
      const int64_t g = m.detection_match[d];
      b.error = g < 0 ? !m.in_crowd[d]
                      : k_of(gt.annotations[static_cast<size_t>(m.truth[static_cast<size_t>(g)])].category_id) != b.k;
      image.detections.push_back(b);
    }
  }
  analysis.gallery = std::move(worst);
  return analysis;
}

nlohmann::ordered_json pr_curves_json(const EvalAnalysis& analysis) {
  nlohmann::ordered_json j;
  j["about"] =
      "COCO's interpolated precision at each recall threshold, area all, maxDets 100: precision50 at IoU 0.5 "
      "(pycocotools' eval['precision'][0, :, k, 0, -1]), precision the mean over IoU 0.50:0.95; ap50 and ap are "
      "their means (the printed per-class AP50 and AP); -1: no ground truth";
  j["recall"] = analysis.recall_thresholds;
  j["classes"] = nlohmann::ordered_json::array();
  for (const ClassCurves& c : analysis.classes)
    j["classes"].push_back({{"name", c.name}, {"category_id", c.category_id}, {"num_truth", c.num_truth},
                            {"ap50", c.ap50}, {"ap", c.ap}, {"precision50", c.precision50}, {"precision", c.precision}});
  return j;
}

nlohmann::ordered_json confusion_json(const DetectionConfusion& c) {
  nlohmann::ordered_json j;
  j["about"] =
      "rows: predicted class, columns: true class (Ultralytics' layout); the background row counts missed objects, "
      "the background column false alarms";
  j["score_threshold"] = c.score_threshold;
  j["iou_threshold"] = c.iou_threshold;
  j["names"] = c.names;
  j["matrix"] = nlohmann::ordered_json::array();
  for (int64_t r = 0; r < c.size(); ++r) {
    std::vector<int64_t> row;
    for (int64_t col = 0; col < c.size(); ++col) row.push_back(c.at(r, col));
    j["matrix"].push_back(row);
  }
  return j;
}

nlohmann::ordered_json ap_by_size_json(const EvalAnalysis& analysis) {
  nlohmann::ordered_json j;
  j["about"] =
      "AP (IoU 0.50:0.95, maxDets 100) per class on objects of each size: small area < 32^2, medium < 96^2, large "
      "above (pixels); -1: no ground truth of that size";
  j["classes"] = nlohmann::ordered_json::object();
  for (const ClassCurves& c : analysis.classes)
    j["classes"][c.name] = {{"small", c.ap_by_size[0]}, {"medium", c.ap_by_size[1]}, {"large", c.ap_by_size[2]}};
  return j;
}

nlohmann::ordered_json gallery_json(const EvalAnalysis& analysis) {
  nlohmann::ordered_json j;
  j["score_threshold"] = analysis.options.score_threshold;
  j["iou_threshold"] = analysis.options.iou_threshold;
  j["images"] = nlohmann::ordered_json::array();
  for (const GalleryImage& image : analysis.gallery)
    j["images"].push_back({{"image_id", image.image_id}, {"file_name", image.file_name},
                           {"false_positives", image.false_positives}, {"misses", image.misses}});
  return j;
}

nlohmann::ordered_json pixel_confusion_json(const EvalAnalysis& analysis) {
  const size_t n = analysis.pixel_classes.size();
  nlohmann::ordered_json j;
  j["about"] =
      "pixels: rows predicted class, columns true class (as the detection matrix); normalized: each column divided "
      "by its sum (the true class's pixels), so the diagonal is each class's accuracy; ignored pixels left out";
  j["names"] = analysis.pixel_classes;
  j["counts"] = nlohmann::ordered_json::array();
  j["normalized"] = nlohmann::ordered_json::array();
  std::vector<int64_t> column_sum(n, 0);
  for (size_t t = 0; t < n; ++t)
    for (size_t p = 0; p < n; ++p) column_sum[t] += analysis.pixel_counts[t * n + p];
  for (size_t p = 0; p < n; ++p) {
    std::vector<int64_t> row;
    nlohmann::ordered_json normalized = nlohmann::ordered_json::array();
    for (size_t t = 0; t < n; ++t) {
      const int64_t v = analysis.pixel_counts[t * n + p];
      row.push_back(v);
      if (column_sum[t] > 0)
        normalized.push_back(static_cast<double>(v) / static_cast<double>(column_sum[t]));
      else
        normalized.push_back(nullptr);
    }
    j["counts"].push_back(row);
    j["normalized"].push_back(normalized);
  }
  return j;
}

}  // namespace detseg
