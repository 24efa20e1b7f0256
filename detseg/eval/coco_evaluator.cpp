// Implements: CocoEvaluator (see coco_evaluator.h).
#include "detseg/eval/coco_evaluator.h"

#include <cstdio>

#include "detseg/core/error.h"
#include "detseg/eval/coco_results.h"
#include "detseg/eval/eval_analysis.h"
#include "detseg/data/readers/rle.h"

namespace detseg {

namespace {

const char* const kStatNames[12] = {"AP", "AP50", "AP75", "APs", "APm", "APl",
                                    "AR1", "AR10", "AR100", "ARs", "ARm", "ARl"};

std::string category_name(const CocoDataset& gt, int64_t id) {
  auto it = gt.category_index.find(id);
  return it == gt.category_index.end() || gt.categories[static_cast<size_t>(it->second)].name.empty()
             ? std::to_string(id)
             : gt.categories[static_cast<size_t>(it->second)].name;
}

}  // namespace

CocoEvaluator::CocoEvaluator(const CocoDataset& ground_truth, CocoEvaluatorOptions options)
    : gt_(ground_truth), options_(std::move(options)) {}

void CocoEvaluator::reset() {
  detections_.clear();
  images_.clear();
  result_ = CocoEvalResult();
}

void CocoEvaluator::process(const EvalSample& sample) {
  DETSEG_CHECK(gt_.image_index.count(sample.image_id), "coco evaluator: image ", sample.image_id,
               " is not in the ground truth ", gt_.source);
  images_.insert(sample.image_id);
  for (const CocoAnnotation& d : sample.detections) {
    DETSEG_CHECK(d.image_id == sample.image_id, "coco evaluator: a detection of image ", d.image_id,
                 " came with image ", sample.image_id);
    if (options_.segm || options_.params.iou_type == CocoIouType::kSegm)
      DETSEG_CHECK(d.segmentation.kind != CocoSegmentation::kNone,
                   "coco evaluator: segm evaluation needs a mask for every detection (image ", sample.image_id, ")");
    detections_.push_back(d);
    detections_.back().id = static_cast<int64_t>(detections_.size());
  }
}

std::string CocoEvaluator::shard_state() const {
  nlohmann::json state = {{"images", std::vector<int64_t>(images_.begin(), images_.end())},
                          {"dets", nlohmann::json::array()}};
  for (const CocoAnnotation& d : detections_) {
    nlohmann::json row = {d.image_id, d.category_id, d.bbox[0], d.bbox[1], d.bbox[2], d.bbox[3], d.score};
    const CocoRle& rle = d.segmentation.rle;
    if (d.segmentation.kind == CocoSegmentation::kRle) row.push_back({rle.height, rle.width, rle_to_string(rle)});
    state["dets"].push_back(row);
  }
  return state.dump();
}

void CocoEvaluator::merge_shard_state(const std::string& bytes) {
  const nlohmann::json state = nlohmann::json::parse(bytes);
  // An image two shards both evaluated counts once.
  std::set<int64_t> fresh;
  for (int64_t id : state["images"].get<std::vector<int64_t>>())
    if (images_.insert(id).second) fresh.insert(id);
  for (const auto& row : state["dets"]) {
    if (!fresh.count(row[0].get<int64_t>())) continue;
    CocoAnnotation a;
    a.id = static_cast<int64_t>(detections_.size()) + 1;
    a.image_id = row[0].get<int64_t>();
    a.category_id = row[1].get<int64_t>();
    for (int k = 0; k < 4; ++k) a.bbox[k] = row[2 + k].get<double>();
    a.score = row[6].get<double>();
    if (row.size() > 7) {
      a.segmentation.kind = CocoSegmentation::kRle;
      a.segmentation.rle = rle_from_string(row[7][2].get<std::string>(), row[7][0].get<int64_t>(), row[7][1].get<int64_t>());
    }
    detections_.push_back(a);
  }
}

Metrics CocoEvaluator::summarize() {
  Metrics m;
  m.results = coco_results_json(detections_);
  if (!options_.metrics) {
    m.text = str(" ", detections_.size(), " detections on ", images_.size(), " images (no metrics computed)\n");
    m.json["num_detections"] = detections_.size();
    return m;
  }
  CocoEvalParams params = options_.params;
  if (params.image_ids.empty()) params.image_ids.assign(images_.begin(), images_.end());
  params.keep_matches = params.keep_matches || options_.analysis;
  // coco_results_from checks ids and sizes and sets ids and areas as loadRes does.
  result_ = coco_evaluate(gt_, coco_results_from(detections_, gt_, params.iou_type == CocoIouType::kBbox), params);
  for (int i = 0; i < 12; ++i) m.values.emplace_back(kStatNames[i], result_.stats[i]);
  m.text = coco_summary_text(result_);
  m.json["stats"] = result_.stats;
  if (options_.segm) {
    CocoEvalParams segm_params = params;
    segm_params.iou_type = CocoIouType::kSegm;
    const CocoEvalResult segm = coco_evaluate(gt_, coco_results_from(detections_, gt_, /*box_mode=*/false), segm_params);
    for (int i = 0; i < 12; ++i) m.values.emplace_back(std::string("segm_") + kStatNames[i], segm.stats[i]);
    m.text += " segm (instance masks):\n" + coco_summary_text(segm);
    m.json["segm_stats"] = segm.stats;
  }
  const bool ap50 = result_.per_category_ap50.size() == result_.per_category_ap.size();
  m.json["per_category_ap"] = nlohmann::ordered_json::object();
  m.json["per_category_ap50"] = nlohmann::ordered_json::object();
  std::string table = ap50 ? "\n category                       AP    AP50\n" : "\n category                       AP\n";
  for (size_t k = 0; k < result_.per_category_ap.size(); ++k) {
    const std::string name = category_name(gt_, result_.params.category_ids[k]);
    m.per_class.emplace_back("AP/" + name, result_.per_category_ap[k]);
    m.json["per_category_ap"][name] = result_.per_category_ap[k];
    char line[160];
    if (ap50) {
      m.per_class.emplace_back("AP50/" + name, result_.per_category_ap50[k]);
      m.json["per_category_ap50"][name] = result_.per_category_ap50[k];
      std::snprintf(line, sizeof(line), " %-28s %7.3f %7.3f\n", name.c_str(), result_.per_category_ap[k],
                    result_.per_category_ap50[k]);
    } else {
      std::snprintf(line, sizeof(line), " %-28s %7.3f\n", name.c_str(), result_.per_category_ap[k]);
    }
    table += line;
  }
  // AP by object size per class: in the JSON always (a few numbers), in the text with the table.
  std::vector<std::vector<double>> by_size;
  for (const char* size : {"small", "medium", "large"}) {
    int64_t a = -1;
    for (size_t i = 0; i < result_.params.area_labels.size(); ++i)
      if (result_.params.area_labels[i] == size) a = static_cast<int64_t>(i);
    by_size.push_back(a >= 0 ? coco_category_ap(result_, 0, result_.T, a) : std::vector<double>(result_.K, -1.0));
  }
  m.json["per_category_ap_by_size"] = nlohmann::ordered_json::object();
  std::string size_table = "\n AP by object size (IoU 0.50:0.95; small < 32^2 < medium < 96^2 < large px; -: none)\n"
                           " category                     small  medium   large\n";
  auto cell = [](double v) {
    char text[16];
    if (v > -1)
      std::snprintf(text, sizeof(text), " %7.3f", v);
    else
      std::snprintf(text, sizeof(text), " %7s", "-");
    return std::string(text);
  };
  for (size_t k = 0; k < result_.per_category_ap.size(); ++k) {
    const std::string name = category_name(gt_, result_.params.category_ids[k]);
    m.json["per_category_ap_by_size"][name] = {{"small", by_size[0][k]}, {"medium", by_size[1][k]}, {"large", by_size[2][k]}};
    char line[64];
    std::snprintf(line, sizeof(line), " %-26s", name.c_str());
    size_table += line + cell(by_size[0][k]) + cell(by_size[1][k]) + cell(by_size[2][k]) + "\n";
  }
  if (options_.per_class_text) m.text += table + size_table;
  return m;
}

std::shared_ptr<EvalAnalysis> CocoEvaluator::analysis() const {
  if (!options_.analysis || !options_.metrics || !result_.params.keep_matches) return nullptr;
  return std::make_shared<EvalAnalysis>(analyze_detections(
      gt_, detections_, std::vector<int64_t>(images_.begin(), images_.end()), result_));
}

}  // namespace detseg
