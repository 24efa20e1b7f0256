// The numbers behind the evaluation pictures: the detection confusion matrix worked out by hand
// (Ultralytics' layout and matching, crowd regions, the score threshold), the PR curves against
// pycocotools' own precision array on the shared reference case, the numbers the pictures show
// against the ones the evaluator prints, the pixel confusion matrix against the printed per-class
// accuracy, and the TensorBoard PR-curve summaries read back by tensorboard's own reader.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "command_runner.h"
#include "detseg/core/files.h"
#include "detseg/data/readers/coco.h"
#include "detseg/eval/coco_eval.h"
#include "detseg/eval/coco_evaluator.h"
#include "detseg/eval/eval_analysis.h"
#include "detseg/eval/seg_metrics.h"
#include "detseg/io/tfevents.h"
#include "detseg/viz/eval_pictures.h"
#include "peer_python.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using namespace detseg;

namespace {

const std::string kCase = std::string(DETSEG_SHARED_DIR) + "/coco_cases/case_small/";

CocoAnnotation box(int64_t id, int64_t image, int64_t category, double x, double y, double w, double h,
                   double score = 1, bool crowd = false) {
  CocoAnnotation a;
  a.id = id;
  a.image_id = image;
  a.category_id = category;
  a.bbox[0] = x;
  a.bbox[1] = y;
  a.bbox[2] = w;
  a.bbox[3] = h;
  a.area = w * h;
  a.score = score;
  a.iscrowd = crowd;
  return a;
}

// Two classes, two images; every kind of cell of the matrix.
CocoDataset two_class_truth() {
  CocoDataset gt;
  gt.images = {{1, "one.jpg", 200, 200}, {2, "two.jpg", 300, 300}};
  gt.categories = {{1, "cat", ""}, {2, "dog", ""}};
  gt.annotations = {box(1, 1, 1, 0, 0, 10, 10),        // a: cat, found
                    box(2, 1, 2, 20, 20, 10, 10),      // b: dog, taken by a cat detection
                    box(3, 1, 2, 50, 50, 10, 10),      // c: dog, missed
                    box(4, 2, 1, 0, 0, 100, 100, 1, true),  // a crowd of cats
                    box(5, 2, 2, 200, 200, 10, 10)};   // dog, missed
  gt.index();
  return gt;
}

std::vector<CocoAnnotation> two_class_detections() {
  return {box(1, 1, 1, 0, 0, 10, 10, 0.9),      // d1 on a: cat as cat
          box(2, 1, 1, 20, 20, 10, 10, 0.6),    // d2 on b (IoU 1): dog taken for a cat
          box(3, 1, 2, 21, 20, 10, 10, 0.5),    // d3 on b (IoU 90/110): b keeps d2, so a false alarm
          box(4, 1, 2, 80, 80, 5, 5, 0.2),      // below the 0.25 threshold: not counted
          box(5, 1, 2, 100, 100, 10, 10, 0.3),  // nothing there: a false alarm
          box(6, 2, 1, 10, 10, 20, 20, 0.9)};   // inside the crowd: not a false alarm
}

// The venv's python running `script` with `args`; false (the test skips) without the module.
bool run_python(const std::string& module, const fs::path& script, const std::string& args) {
  if (!fs::exists(test::kPeerPython) ||
      std::system((test::kPeerPython + " -c 'import " + module + "' >/dev/null 2>&1").c_str()) != 0)
    return false;
  const detseg::testing::CommandRun r = detseg::testing::run_command(test::kPeerPython + " " + script.string() + " " + args);
  EXPECT_EQ(r.code, 0) << r.output;
  return r.code == 0;
}

// case_small through the evaluator the eval loop drives, image by image, every image processed.
struct EvaluatedCase {
  CocoDataset gt;
  Metrics metrics;
  std::shared_ptr<EvalAnalysis> analysis;
};

EvaluatedCase evaluate_case_small() {
  EvaluatedCase e;
  e.gt = read_coco(kCase + "gt.json");
  const CocoDataset dt = read_coco_results(kCase + "dt.json", e.gt);
  CocoEvaluatorOptions o;
  o.analysis = true;
  CocoEvaluator evaluator(e.gt, o);
  std::map<int64_t, std::vector<CocoAnnotation>> by_image;
  for (const CocoAnnotation& d : dt.annotations) by_image[d.image_id].push_back(d);
  for (const CocoImage& image : e.gt.images) {
    EvalSample s;
    s.image_id = image.id;
    s.detections = by_image[image.id];
    evaluator.process(s);
  }
  e.metrics = evaluator.summarize();
  e.analysis = evaluator.analysis();
  return e;
}

}  // namespace

TEST(EvalAnalysis, ConfusionMatrixByHand) {
  const CocoDataset gt = two_class_truth();
  std::vector<GalleryImage> images;
  const DetectionConfusion c = detection_confusion(gt, two_class_detections(), {1, 2}, {1, 2}, AnalysisOptions(), &images);
  ASSERT_EQ(c.names, (std::vector<std::string>{"cat", "dog", "background"}));
  // Rows predicted (cat, dog, background), columns true.
  const std::vector<int64_t> expected = {1, 1, 0,   // cat: a found; b taken for a cat
                                         0, 0, 2,   // dog: two false alarms (d3, d5)
                                         0, 2, 0};  // background: c and image 2's dog missed
  EXPECT_EQ(c.counts, expected);
  // Image 1: d2 (another class), d3, d5 are false positives, b and c are missed; image 2: one miss.
  ASSERT_EQ(images.size(), 2u);
  EXPECT_EQ(images[0].image_id, 1);
  EXPECT_EQ(images[0].false_positives, 3);
  EXPECT_EQ(images[0].misses, 2);
  EXPECT_EQ(images[1].image_id, 2);
  EXPECT_EQ(images[1].false_positives, 0);
  EXPECT_EQ(images[1].misses, 1);

  // A threshold of 0.1 lets d4 in: one more false alarm of a dog.
  AnalysisOptions low;
  low.score_threshold = 0.1;
  EXPECT_EQ(detection_confusion(gt, two_class_detections(), {1, 2}, {1, 2}, low).at(1, 2), 3);
  // IoU 0.95: d3 no longer reaches b, the rest is as before.
  AnalysisOptions strict;
  strict.iou_threshold = 0.95;
  EXPECT_EQ(detection_confusion(gt, two_class_detections(), {1, 2}, {1, 2}, strict).counts, expected);

  const nlohmann::ordered_json j = confusion_json(c);
  EXPECT_EQ(j["matrix"], nlohmann::ordered_json::parse("[[1,1,0],[0,0,2],[0,2,0]]"));
  EXPECT_EQ(j["score_threshold"], 0.25);
  EXPECT_EQ(j["iou_threshold"], 0.5);
}

TEST(EvalAnalysis, MatchingKeepsEachTruthsBestDetection) {
  const CocoDataset gt = two_class_truth();
  const std::vector<CocoAnnotation> dets = two_class_detections();
  const ImageMatching m = match_image(gt, {0, 1, 2}, dets, {0, 1, 2, 3, 4}, AnalysisOptions());
  EXPECT_EQ(m.detections, (std::vector<int64_t>{0, 1, 2, 4}));  // d4 scores below 0.25
  EXPECT_EQ(m.truth_match, (std::vector<int64_t>{0, 1, -1}));  // a <- d1, b <- d2 (IoU 1 beats 0.82), c none
  EXPECT_EQ(m.detection_match, (std::vector<int64_t>{0, 1, -1, -1}));
  const ImageMatching crowd = match_image(gt, {3, 4}, dets, {5}, AnalysisOptions());
  EXPECT_TRUE(crowd.truth.size() == 1 && crowd.truth[0] == 4);  // the crowd takes no part
  EXPECT_EQ(crowd.in_crowd, (std::vector<uint8_t>{1}));
}

TEST(EvalAnalysis, GalleryHoldsTheWorstImagesWithTheirErrorsMarked) {
  const CocoDataset gt = two_class_truth();
  const std::vector<CocoAnnotation> dets = two_class_detections();
  CocoEvalParams p;
  p.keep_matches = true;
  const CocoEvalResult r = coco_evaluate(gt, coco_results_from(dets, gt), p);
  AnalysisOptions o;
  o.gallery_images = 1;
  const EvalAnalysis a = analyze_detections(gt, dets, {1, 2}, r, o);
  ASSERT_EQ(a.gallery.size(), 1u);
  const GalleryImage& g = a.gallery[0];
  EXPECT_EQ(g.file_name, "one.jpg");
  ASSERT_EQ(g.truth.size(), 3u);
  EXPECT_FALSE(g.truth[0].error);  // a: found as a cat
  EXPECT_TRUE(g.truth[1].error);   // b: only a cat detection on it
  EXPECT_TRUE(g.truth[2].error);   // c: missed
  ASSERT_EQ(g.detections.size(), 4u);
  EXPECT_EQ(std::vector<bool>({g.detections[0].error, g.detections[1].error, g.detections[2].error,
                               g.detections[3].error}),
            std::vector<bool>({false, true, true, true}));
  EXPECT_EQ(g.detections[3].score, 0.3);
}

TEST(EvalAnalysis, PrCurvesArePycocotoolsPrecisionArray) {
  const detseg::testing::TempDir temp("eval_analysis_pr");
  const fs::path script = temp / "ref.py";
  write_file_atomic(script.string(), R"(import contextlib, io, json, sys
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval
with contextlib.redirect_stdout(io.StringIO()):
    gt = COCO(sys.argv[1]); dt = gt.loadRes(sys.argv[2])
    e = COCOeval(gt, dt, 'bbox'); e.evaluate(); e.accumulate(); e.summarize()
p, r = e.eval['precision'], e.eval['recall']  # [T, R, K, A, M], [T, K, A, M]
json.dump({'cat_ids': [int(c) for c in e.params.catIds],
           'precision': p[:, :, :, 0, -1].transpose(2, 0, 1).tolist(),  # [K, T, R], area all, maxDets 100
           'recall50': r[0, :, 0, -1].tolist(), 'stats': e.stats.tolist()}, open(sys.argv[3], 'w'))
)");
  const fs::path out = temp / "ref.json";
  if (!run_python("pycocotools", script, kCase + "gt.json " + kCase + "dt.json " + out.string()))
    GTEST_SKIP() << "no pycocotools in " << test::kPeerPython << " (scripts/setup.sh --peers)";
  const nlohmann::json ref = nlohmann::json::parse(read_file(out.string()));

  const CocoDataset gt = read_coco(kCase + "gt.json");
  const CocoDataset dt = read_coco_results(kCase + "dt.json", gt);
  CocoEvalParams params;
  params.keep_matches = true;
  const CocoEvalResult result = coco_evaluate(gt, dt, params);
  std::vector<int64_t> images;
  for (const CocoImage& im : gt.images) images.push_back(im.id);
  const EvalAnalysis a = analyze_detections(gt, dt.annotations, images, result);
  ASSERT_EQ(a.classes.size(), ref["cat_ids"].size());
  ASSERT_EQ(a.recall_thresholds.size(), 101u);
  int with_truth = 0;
  double largest = 0;
  for (size_t k = 0; k < a.classes.size(); ++k) {
    const ClassCurves& c = a.classes[k];
    ASSERT_EQ(c.category_id, ref["cat_ids"][k].get<int64_t>());
    const auto& p = ref["precision"][k];  // [T, R]
    if (p[0][0].get<double>() == -1) {  // no ground truth: no curve
      EXPECT_TRUE(c.precision50.empty() && c.precision.empty()) << c.name;
      EXPECT_EQ(c.ap, -1);
      continue;
    }
    ++with_truth;
    ASSERT_EQ(c.precision50.size(), 101u);
    for (size_t r = 0; r < 101; ++r) {
      // IoU 0.5: pycocotools' numbers as they are; 0.50:0.95: their mean over the ten thresholds.
      EXPECT_EQ(c.precision50[r], p[0][r].get<double>()) << c.name << " recall point " << r;
      double mean = 0;
      for (size_t t = 0; t < 10; ++t) mean += p[t][r].get<double>();
      mean /= 10;
      EXPECT_NEAR(c.precision[r], mean, 1e-15) << c.name << " recall point " << r;
      largest = std::max(largest, std::abs(c.precision[r] - mean));
    }
    // The score sweep at threshold 0 takes every detection: its recall is pycocotools' at IoU 0.5.
    EXPECT_EQ(c.sweep_tp[0] / static_cast<double>(c.num_truth), ref["recall50"][k].get<double>()) << c.name;
  }
  EXPECT_GE(with_truth, 8);  // the case leaves one category without ground truth
  std::printf("case_small: %d classes' PR curves equal pycocotools' (0.50:0.95 mean: largest difference %.3g)\n",
              with_truth, largest);
}

TEST(EvalAnalysis, PicturesShowThePrintedNumbers) {
  const EvaluatedCase e = evaluate_case_small();
  ASSERT_TRUE(e.analysis);
  const EvalAnalysis& a = *e.analysis;
  double small_sum = 0;
  int small_classes = 0;
  for (const ClassCurves& c : a.classes) {
    if (c.ap == -1) continue;
    // The legend's numbers are the printed per-class AP and AP50, to the last bit.
    EXPECT_EQ(c.ap, e.metrics.get("AP/" + c.name)) << c.name;
    EXPECT_EQ(c.ap50, e.metrics.get("AP50/" + c.name)) << c.name;
    const auto& size = e.metrics.json["per_category_ap_by_size"][c.name];
    EXPECT_EQ(c.ap_by_size[0], size["small"].get<double>());
    EXPECT_EQ(c.ap_by_size[1], size["medium"].get<double>());
    EXPECT_EQ(c.ap_by_size[2], size["large"].get<double>());
    if (c.ap_by_size[0] > -1) {
      small_sum += c.ap_by_size[0];
      ++small_classes;
    }
    // The curve's mean is the class's AP50.
    double mean = 0;
    for (double v : c.precision50) mean += v;
    EXPECT_NEAR(mean / 101, c.ap50, 1e-12) << c.name;
  }
  // The size table's classes average to the printed APs (stats[3]).
  ASSERT_GT(small_classes, 0);
  EXPECT_NEAR(small_sum / small_classes, e.metrics.get("APs"), 1e-12);
  // The printed text has the size table.
  EXPECT_NE(e.metrics.text.find("AP by object size"), std::string::npos) << e.metrics.text;
  // The confusion matrix's columns count every ground truth that is not a crowd region.
  std::vector<int64_t> truth(a.confusion.names.size(), 0);
  for (const CocoAnnotation& g : e.gt.annotations)
    if (!g.iscrowd) {
      auto k = std::find(a.confusion.names.begin(), a.confusion.names.end(),
                         e.gt.categories[static_cast<size_t>(e.gt.category_index.at(g.category_id))].name);
      ++truth[static_cast<size_t>(k - a.confusion.names.begin())];
    }
  for (int64_t col = 0; col + 1 < a.confusion.size(); ++col) {
    int64_t sum = 0;
    for (int64_t r = 0; r < a.confusion.size(); ++r) sum += a.confusion.at(r, col);
    EXPECT_EQ(sum, truth[static_cast<size_t>(col)]) << a.confusion.names[static_cast<size_t>(col)];
  }

  // The files hold the same numbers.
  const detseg::testing::TempDir temp("eval_analysis_files");
  EvalAnalysis copy = a;
  copy.image_dir = temp.str();  // no images there: the gallery says so in its tiles
  const std::vector<std::string> written = write_eval_pictures(copy, (temp / "pictures").string());
  for (const char* name : {"pr_curves_iou50.png", "pr_curves_iou50-95.png", "pr_curves.json", "confusion_matrix.png",
                           "confusion_matrix.json", "ap_by_size.png", "ap_by_size.json", "gallery.json", "gallery.png"})
    EXPECT_TRUE(fs::exists(temp / "pictures" / name)) << name;
  EXPECT_EQ(written.size(), 9u);
  const auto curves = nlohmann::json::parse(read_file((temp / "pictures" / "pr_curves.json").string()));
  for (const auto& c : curves["classes"])
    if (c["ap"].get<double>() > -1) {
      EXPECT_EQ(c["ap"].get<double>(), e.metrics.get("AP/" + c["name"].get<std::string>()));
      EXPECT_EQ(c["ap50"].get<double>(), e.metrics.get("AP50/" + c["name"].get<std::string>()));
    }
  const auto sizes = nlohmann::ordered_json::parse(read_file((temp / "pictures" / "ap_by_size.json").string()));
  EXPECT_EQ(sizes["classes"], e.metrics.json["per_category_ap_by_size"]);
  const auto gallery = nlohmann::json::parse(read_file((temp / "pictures" / "gallery.json").string()));
  ASSERT_EQ(gallery["images"].size(), 8u);
  for (size_t i = 1; i < 8; ++i) {
    const auto errors = [&](size_t j) {
      return gallery["images"][j]["false_positives"].get<int64_t>() + gallery["images"][j]["misses"].get<int64_t>();
    };
    EXPECT_GE(errors(i - 1), errors(i));
  }
}

TEST(EvalAnalysis, PixelConfusionDiagonalIsThePrintedClassAccuracy) {
  // 3 classes; ground truth and prediction over 8 pixels (255 ignored).
  const std::vector<int32_t> truth = {0, 0, 0, 1, 1, 2, 2, 255};
  const std::vector<int32_t> predicted = {0, 0, 1, 1, 2, 2, 2, 0};
  SemSegEvaluator evaluator(3, 255, MeanIouConvention::kNonEmptyUnion, {"sky", "road", "car"});
  EvalSample s;
  s.ground_truth_labels = truth.data();
  s.predicted_labels = predicted.data();
  s.height = 1;
  s.width = 8;
  evaluator.process(s);
  const Metrics m = evaluator.summarize();
  const std::shared_ptr<EvalAnalysis> a = evaluator.analysis();
  ASSERT_TRUE(a && a->has_segmentation());
  const nlohmann::ordered_json j = pixel_confusion_json(*a);
  // Rows predicted, columns true: sky 2 of 3 right (one taken for road), road 1 of 2, car 2 of 2.
  EXPECT_EQ(j["counts"], nlohmann::ordered_json::parse("[[2,0,0],[1,1,0],[0,1,2]]"));
  const SegMetrics sm = seg_metrics(evaluator.matrix());
  for (size_t k = 0; k < 3; ++k) EXPECT_DOUBLE_EQ(j["normalized"][k][k].get<double>(), sm.accuracy[k]);
  EXPECT_DOUBLE_EQ(j["normalized"][0][0].get<double>(), 2.0 / 3);
  EXPECT_NEAR((2.0 / 3 + 0.5 + 1.0) / 3, m.get("mean_accuracy"), 1e-15);
  const MatrixPicture p = pixel_confusion_picture(*a);
  EXPECT_EQ(p.text[0], "0.67");  // predicted sky, true sky
  EXPECT_EQ(p.text[3], "0.33");  // predicted road, true sky
  const detseg::testing::TempDir temp("eval_analysis_pixels");
  const std::vector<std::string> written = write_eval_pictures(*a, temp.str());
  EXPECT_EQ(written, (std::vector<std::string>{temp.str() + "/pixel_confusion_matrix.png",
                                               temp.str() + "/pixel_confusion_matrix.json"}));
  EXPECT_EQ(nlohmann::ordered_json::parse(read_file(written[1])), j);
}

TEST(EvalAnalysis, TensorBoardReadsOurPrCurves) {
  const EvaluatedCase e = evaluate_case_small();
  ASSERT_TRUE(e.analysis);
  const detseg::testing::TempDir temp("eval_analysis_tb");
  std::string events_path;
  {
    EventWriter events((temp / "run").string());
    events.add_scalar("AP", 0.5, 7);
    add_pr_curve_summaries(events, *e.analysis, "eval/val/", 7);
    events.flush();
    events_path = events.path();
  }
  // Our own reader still sees the scalar, and skips the curves.
  const std::vector<ScalarEvent> scalars = read_scalar_events(events_path);
  ASSERT_EQ(scalars.size(), 1u);
  EXPECT_EQ(scalars[0].tag, "AP");

  const fs::path script = temp / "read.py";
  write_file_atomic(script.string(), R"(import json, sys
from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.plugins.pr_curve import metadata
from tensorboard.util import tensor_util
acc = ea.EventAccumulator(sys.argv[1], size_guidance={ea.TENSORS: 0})
acc.Reload()
content = acc.PluginTagToContent(metadata.PLUGIN_NAME)
out = {}
for tag in acc.Tags()['tensors']:
    events = acc.Tensors(tag)
    out[tag] = {'num_thresholds': metadata.parse_plugin_metadata(content[tag]).num_thresholds,
                'display_name': acc.SummaryMetadata(tag).display_name,
                'steps': [e.step for e in events],
                'values': tensor_util.make_ndarray(events[0].tensor_proto).tolist()}
json.dump(out, open(sys.argv[2], 'w'))
)");
  const fs::path out = temp / "read.json";
  if (!run_python("tensorboard", script, (temp / "run").string() + " " + out.string()))
    GTEST_SKIP() << "no tensorboard in " << test::kPeerPython << " (scripts/setup.sh --peers)";
  const nlohmann::json read = nlohmann::json::parse(read_file(out.string()));
  int curves = 0;
  for (const ClassCurves& c : e.analysis->classes) {
    const std::string tag = "eval/val/pr_iou50/" + c.name;
    if (c.num_truth == 0 && c.sweep_fp[0] == 0) {
      EXPECT_FALSE(read.contains(tag)) << tag;
      continue;
    }
    ASSERT_TRUE(read.contains(tag)) << tag << " in " << read.dump().substr(0, 500);
    ++curves;
    const auto& r = read[tag];
    EXPECT_EQ(r["num_thresholds"], 101);
    EXPECT_EQ(r["steps"], nlohmann::json::array({7}));
    EXPECT_EQ(r["display_name"], c.name + " (IoU 0.5)");
    const PrCurveData d = pr_curve_data(c);
    const std::vector<float>* rows[6] = {&d.true_positives, &d.false_positives, &d.true_negatives,
                                         &d.false_negatives, &d.precision, &d.recall};
    ASSERT_EQ(r["values"].size(), 6u);
    for (size_t row = 0; row < 6; ++row) {
      ASSERT_EQ(r["values"][row].size(), 101u);
      for (size_t i = 0; i < 101; ++i) EXPECT_EQ(r["values"][row][i].get<float>(), (*rows[row])[i]) << tag << " " << row;
    }
    // tp + fn is the class's ground truth at every threshold, and recall at threshold 0 is COCO's.
    EXPECT_EQ(r["values"][0][50].get<double>() + r["values"][3][50].get<double>(), static_cast<double>(c.num_truth));
    if (c.num_truth > 0)
      EXPECT_FLOAT_EQ(r["values"][5][0].get<float>(), static_cast<float>(c.sweep_tp[0] / c.num_truth));
    else  // detections of a class without ground truth: all false positives, recall 0
      EXPECT_EQ(r["values"][1][0].get<double>(), c.sweep_fp[0]);
  }
  EXPECT_GE(curves, 9);
}
