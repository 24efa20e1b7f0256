// Implements: `detseg coco-eval`: COCO metrics of a results JSON against ground truth, printed as
// pycocotools' 12-line summary, with an optional per-category table and a JSON of the numbers.
#include <malloc.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>

#include "cli/commands.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/json.h"
#include "detseg/core/log.h"
#include "detseg/core/threads.h"
#include "detseg/data/readers/coco.h"
#include "detseg/eval/coco_eval.h"

namespace detseg::cli {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

const char* kStatNames[12] = {"AP", "AP50", "AP75", "APs", "APm", "APl",
                              "AR1", "AR10", "AR100", "ARs", "ARm", "ARl"};

std::string category_name(const CocoDataset& gt, int64_t id) {
  auto it = gt.category_index.find(id);
  return it == gt.category_index.end() ? std::string() : gt.categories[it->second].name;
}

std::string result_json(const CocoEvalArgs& args, const CocoDataset& gt, const CocoDataset& dt,
                        const CocoEvalResult& r, double load_s) {
  std::string out = "{\n \"iou_type\": ";
  append_json_string(out, args.iou_type);
  out += ",\n \"class_agnostic\": ";
  out += args.class_agnostic ? "true" : "false";
  out += ",\n \"stat_names\": [";
  for (int i = 0; i < 12; ++i) {
    out += i ? ", \"" : "\"";
    out += kStatNames[i];
    out += "\"";
  }
  out += "],\n \"stats\": [";
  for (int i = 0; i < 12; ++i) {
    if (i) out += ", ";
    append_json_number(out, r.stats[i]);
  }
  out += "],\n \"per_category_ap\": {";
  for (size_t k = 0; k < r.per_category_ap.size(); ++k) {
    out += k ? ", \"" : "\"";
    out += std::to_string(r.params.category_ids[k]);
    out += "\": ";
    append_json_number(out, r.per_category_ap[k]);
  }
  out += "},\n \"per_category\": [";
  for (size_t k = 0; k < r.per_category_ap.size(); ++k) {
    out += k ? ",\n  {\"id\": " : "\n  {\"id\": ";
    out += std::to_string(r.params.category_ids[k]);
    out += ", \"name\": ";
    append_json_string(out, category_name(gt, r.params.category_ids[k]));
    out += ", \"ap\": ";
    append_json_number(out, r.per_category_ap[k]);
    if (k < r.per_category_ap50.size()) {
      out += ", \"ap50\": ";
      append_json_number(out, r.per_category_ap50[k]);
    }
    out += "}";
  }
  out += "],\n \"counts\": {\"images\": " + std::to_string(gt.images.size()) +
         ", \"categories\": " + std::to_string(gt.categories.size()) +
         ", \"gt_annotations\": " + std::to_string(gt.annotations.size()) +
         ", \"detections\": " + std::to_string(dt.annotations.size()) + "},\n \"timing\": {\"load_s\": ";
  append_json_number(out, load_s);
  out += ", \"evaluate_s\": ";
  append_json_number(out, r.seconds_evaluate);
  out += ", \"accumulate_s\": ";
  append_json_number(out, r.seconds_accumulate);
  out += "}\n}\n";
  return out;
}

std::string base_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

// Detections that name their image (predict's detections.json: "file_name" beside "image_id") must
// name the ground truth's image of that id: ids numbered for another data set would score the
// boxes against the wrong pictures. Files without the key (COCO's own results) are not looked at.
void check_result_file_names(const JsonDocument& dt_json, const CocoDataset& gt, const CocoDataset& dt) {
  const auto results = simdjson::dom::array(dt_json.root);
  if (results.size() == 0 || results.at(0)["file_name"].error() != simdjson::SUCCESS) return;
  size_t i = 0;
  for (simdjson::dom::element result : results) {
    std::string_view name;
    if (result["file_name"].get(name) == simdjson::SUCCESS) {
      const int64_t id = dt.annotations[i].image_id;
      const std::string& expected = gt.images[gt.image_index.at(id)].file_name;
      DETSEG_CHECK(base_name(std::string(name)) == base_name(expected), location(dt_json.path), "result ", i,
                   ": image ", id, " is ", name, " here but ", expected, " in ", gt.source,
                   ": the ids were numbered for another data set");
    }
    ++i;
  }
}

// --images: predict's table of the ids it gave ({"images": [{"id", "file_name", ...}]}); every id
// must be the ground truth's image of that file name.
void check_image_table(const std::string& path, const CocoDataset& gt) {
  JsonDocument table;
  load_json(path, table);
  simdjson::dom::array images;
  DETSEG_CHECK(table.root["images"].get(images) == simdjson::SUCCESS || table.root.get(images) == simdjson::SUCCESS,
               path, ": expected {\"images\": [{\"id\", \"file_name\"}, ...]} (detseg predict's images.json)");
  size_t i = 0;
  for (simdjson::dom::element image : images) {
    int64_t id = 0;
    std::string_view name;
    DETSEG_CHECK(image["id"].get(id) == simdjson::SUCCESS && image["file_name"].get(name) == simdjson::SUCCESS,
                 location(path), "images[", i, "]: expected an \"id\" (integer) and a \"file_name\" (string)");
    const auto at = gt.image_index.find(id);
    DETSEG_CHECK(at != gt.image_index.end(), location(path), "images[", i, "]: image ", id, " (", name,
                 ") is not in the ground truth ", gt.source);
    const std::string& expected = gt.images[at->second].file_name;
    DETSEG_CHECK(base_name(std::string(name)) == base_name(expected), location(path), "images[", i, "]: image ", id,
                 " is ", name, " here but ", expected, " in ", gt.source, ": the ids were numbered for another data set");
    ++i;
  }
}

// Reads --gt and --dt. The detections file is parsed on a second thread while the ground truth is
// read, unless it is too small to pay for starting one (~0.1-0.2 ms; the small bench case's is 73
// kB). Both parsers are gone on return, so evaluation's arrays reuse their (already faulted-in) heap.
void load_gt_and_detections(const CocoEvalArgs& args, CocoDataset& gt, CocoDataset& dt) {
  JsonDocument dt_json;
  std::error_code size_error;
  const auto dt_bytes = std::filesystem::file_size(args.dt, size_error);
  const bool parse_aside = current_threads() > 1 && !size_error && dt_bytes >= (256u << 10);
  std::future<void> parsing;
  if (parse_aside) parsing = std::async(std::launch::async, [&] { load_json(args.dt, dt_json); });
  try {
    gt = read_coco(args.gt);
  } catch (...) {
    if (parse_aside) parsing.wait();
    throw;
  }
  if (parse_aside)
    parsing.get();
  else
    load_json(args.dt, dt_json);
  dt = read_coco_results(dt_json, gt);
  check_result_file_names(dt_json, gt, dt);
}

}  // namespace

int run_coco_eval(const CocoEvalArgs& args) {
  DETSEG_CONFIG_CHECK(!args.gt.empty() && !args.dt.empty(), "coco-eval: --gt and --dt are required");
  DETSEG_CONFIG_CHECK(args.iou_type == "bbox" || args.iou_type == "segm",
                      "coco-eval: --iou-type must be bbox or segm, got \"", args.iou_type, "\"");
  check_output_is_not_an_input(args.json_out, "--json",
                               {{args.gt, "the ground-truth file given by --gt"},
                                {args.dt, "the detections file given by --dt"},
                                {args.images, "the image table given by --images"}});
  // Large buffers (JSON text and tape, growing annotation vectors) stay in the heap instead of
  // fresh mmaps, each page faulted in and unmapped again on free: reused memory cuts the small
  // case's page faults by 12 % and its process time by ~0.5 ms (docs/benchmarks.md).
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  const auto start = std::chrono::steady_clock::now();
  CocoDataset gt, dt;
  load_gt_and_detections(args, gt, dt);
  if (!args.images.empty()) check_image_table(args.images, gt);
  const double load_s = seconds_since(start);
  if (dt.annotations.empty())
    log_warn("coco-eval: ", args.dt, " holds no detections: every AP and AR is 0 (or -1 without ground truth)");

  CocoEvalParams params;
  params.iou_type = args.iou_type == "segm" ? CocoIouType::kSegm : CocoIouType::kBbox;
  params.use_categories = !args.class_agnostic;
  CocoEvalResult result = coco_evaluate(gt, dt, params, current_threads());

  std::printf("iou type: %s%s; %zu images, %zu ground truth, %zu detections\n", args.iou_type.c_str(),
              args.class_agnostic ? " (class-agnostic)" : "", gt.images.size(), gt.annotations.size(),
              dt.annotations.size());
  std::fputs(coco_summary_text(result).c_str(), stdout);
  if (args.per_class && !result.per_category_ap.empty()) {
    const bool ap50 = result.per_category_ap50.size() == result.per_category_ap.size();
    std::printf("\n%8s  %-24s %5s%s\n", "id", "category", "AP", ap50 ? "   AP50" : "");
    for (size_t k = 0; k < result.per_category_ap.size(); ++k) {
      const int64_t id = result.params.category_ids[k];
      const double ap = result.per_category_ap[k];
      if (ap < 0)
        std::printf("%8lld  %-24s %s\n", static_cast<long long>(id), category_name(gt, id).c_str(),
                    "-1 (no ground truth)");
      else if (ap50)
        std::printf("%8lld  %-24s %.3f  %.3f\n", static_cast<long long>(id), category_name(gt, id).c_str(), ap,
                    result.per_category_ap50[k]);
      else
        std::printf("%8lld  %-24s %.3f\n", static_cast<long long>(id), category_name(gt, id).c_str(), ap);
    }
  }
  log_info("coco-eval: load ", load_s, " s, evaluate ", result.seconds_evaluate, " s, accumulate ",
           result.seconds_accumulate, " s");
  // Atomic, not synced: the metrics are regenerated from the two inputs in milliseconds.
  if (!args.json_out.empty())
    write_file_atomic(args.json_out, result_json(args, gt, dt, result, load_s), Durability::kAtomicOnly);
  return 0;
}

}  // namespace detseg::cli
