// Harness: `detseg coco-eval` on a ground-truth / detections pair, through the command's own body
// (cli/cmd_coco_eval.cpp: both readers, the evaluation, the summary and the --json writer).
// Input: GT JSON, separator, DT JSON[, separator, option words: segm agnostic per-class json
// threads]. Without a separator the detections are an empty list.
#include <string>

#include "cli/commands.h"
#include "detseg/core/threads.h"
#include "fuzz_common.h"

using namespace detseg;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts = fuzz::split_parts(data, size);
  const std::string options = parts.size() > 2 ? parts[2] : "";
  cli::CocoEvalArgs args;
  args.gt = fuzz::write_scratch("gt.json", parts[0]);
  args.dt = fuzz::write_scratch("dt.json", parts.size() > 1 ? parts[1] : "[]");
  args.iou_type = options.find("segm") != std::string::npos ? "segm" : "bbox";
  args.class_agnostic = options.find("agnostic") != std::string::npos;
  args.per_class = options.find("per-class") != std::string::npos;
  if (options.find("json") != std::string::npos) args.json_out = (fuzz::scratch_dir() / "stats.json").string();
  // The evaluator's thread pool (eval/parallel.h) only runs with more than one thread.
  set_threads(options.find("threads") != std::string::npos ? 2 : 1);
  fuzz::expect_clean([&] { cli::run_coco_eval(args); });
  return 0;
}
