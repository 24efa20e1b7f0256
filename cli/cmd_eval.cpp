// Implements: `detseg eval`: COCO metrics (detectors) or mIoU (segmenters) and eval losses of one checkpoint, or of every new
// checkpoint of a training run (--continuous).
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/log.h"
#include "detseg/core/stop_signal.h"
#include "detseg/engine/evaluate.h"
#include "detseg/engine/memory.h"
#include "detseg/train/checkpoint.h"

namespace detseg::cli {
namespace {

// Where --detections puts set `set`'s file: the path itself for eval_input, <stem>-<set>.json for
// a named set.
std::string detections_path(const std::string& path, const std::string& set) {
  if (path.empty() || set.empty()) return path;
  const size_t dot = path.rfind(".json");
  return dot == std::string::npos ? path + "-" + set : path.substr(0, dot) + "-" + set + ".json";
}

// What an evaluation reads, which its outputs must not replace.
std::vector<CommandInput> evaluation_inputs(const PipelineConfig& config, const std::string& checkpoint) {
  std::vector<CommandInput> inputs = {{checkpoint, "the checkpoint evaluated"}};
  for (const std::string& file : config.files)
    inputs.push_back({file, file == config.source ? "the config given by --config" : "a _base_ file of the config"});
  for (const EvalSet& set : evaluation_sets(config)) {
    const std::string name = set.name.empty() ? "eval_input" : set.name == "train" && config.eval.on_train > 0
                                                                   ? "train_input"
                                                                   : "eval_inputs." + set.name;
    inputs.push_back({set.input.annotations, name + ".annotations"});
    inputs.push_back({set.input.label_map, name + ".label_map"});
  }
  return inputs;
}

}  // namespace

int run_eval(const EvalArgs& args) {
  install_stop_handlers();  // SIGINT/SIGTERM end the run at a safe point (see stop_signal.h)
  guard_cpu_allocations();  // a block larger than the memory left fails with its size, not the OOM killer
  PipelineConfig config = load_config(args.config, args.overrides);
  if (!args.eval_set.empty()) {
    // Keep only the named set ("eval" names eval_input).
    std::vector<std::pair<std::string, InputConfig>> kept;
    for (auto& named : config.eval_inputs)
      if (named.first == args.eval_set) kept.push_back(named);
    const bool on_train = args.eval_set == "train" && config.eval.on_train > 0;
    DETSEG_CONFIG_CHECK(args.eval_set == "eval" || !kept.empty() || on_train, args.config, ": --eval-set ",
                        args.eval_set, ": no such evaluation set (eval, the names under eval_inputs, or train)");
    if (args.eval_set != "eval") config.eval_input = InputConfig{};
    if (!on_train) config.eval.on_train = 0;
    config.eval_inputs = kept;
  }
  DETSEG_CONFIG_CHECK(!evaluation_sets(config).empty(), args.config,
                      ": nothing to evaluate: set eval_input.annotations (or eval_inputs, or eval.on_train)");
  check_model_fits_in_memory(config, ModelUse::kInference);
  if (args.continuous) {
    std::string dir = !args.checkpoint_dir.empty() ? args.checkpoint_dir : args.model_dir;
    DETSEG_CONFIG_CHECK(!dir.empty(), "--continuous needs --checkpoint-dir (or --model-dir)");
    log_to_file(dir + "/eval.log");
    evaluate_continuously(config, dir, args.wait_interval);
    return 0;
  }
  std::string checkpoint = args.checkpoint;
  if (checkpoint.empty()) {
    DETSEG_CONFIG_CHECK(!args.model_dir.empty(), "give --checkpoint or --model-dir");
    CheckpointManagerOptions options;
    options.model_dir = args.model_dir;
    auto latest = CheckpointManager(options).latest();
    DETSEG_CHECK(latest.has_value(), args.model_dir, ": no checkpoint in this folder");
    checkpoint = *latest;
  }
  // Before the evaluation: no output may replace an input, nor the other output.
  const std::vector<CommandInput> inputs = evaluation_inputs(config, checkpoint);
  check_output_is_not_an_input(args.json_out, "--json", inputs);
  for (const EvalSet& set : evaluation_sets(config)) {
    if (args.detections_out.empty()) break;
    const std::string path = detections_path(args.detections_out, set.name);
    check_output_is_not_an_input(path, "--detections", inputs);
    DETSEG_CONFIG_CHECK(path != args.json_out && !same_file(path, args.json_out), "--detections ", path,
                        ": is also the --json file; give each its own path");
  }
  // The checkpoint's folder (the model dir) keeps a log of its evaluations.
  const std::string folder = std::filesystem::path(checkpoint).parent_path().string();
  const std::string model_dir = folder.empty() ? std::string(".") : folder;
  log_to_file(model_dir + "/eval.log");
  append_to_log_file(str("detseg eval --config ", args.config, " --checkpoint ", checkpoint));
  const std::vector<EvalReport> reports =
      evaluate_checkpoint_on_sets(config, checkpoint, nullptr, /*per_class=*/true, !args.no_metrics);
  print_output(str(checkpoint, ": step ", reports[0].step, "\n", eval_reports_text(reports)));
  if (!args.json_out.empty()) {
    // One set: its JSON as is; several: {"eval": ..., "<name>": ...}.
    std::string json = reports[0].json;
    if (reports.size() > 1) {
      json = "{";
      for (size_t i = 0; i < reports.size(); ++i)
        json += str(i ? ",\n" : "\n", "\"", reports[i].set_name.empty() ? "eval" : reports[i].set_name, "\": ", reports[i].json);
      json += "}\n";
    }
    write_file_atomic(args.json_out, json);
  }
  for (const EvalReport& report : reports) {
    if (report.detections.empty()) continue;
    const std::string set = report.set_name.empty() ? "" : "-" + report.set_name;
    std::string path = detections_path(args.detections_out, report.set_name);
    if (path.empty()) {
      make_directories(model_dir + "/eval");
      path = str(model_dir, "/eval/detections", set, "-", report.step, ".json");
      check_output_is_not_an_input(path, "", inputs);
    }
    write_file_atomic(path, report.detections);
    print_output(str(report.num_detections, " detections (COCO results format) written to ", path, "\n"));
  }
  // The evaluation pictures (eval.pictures): PR curves, confusion matrix, AP by size, the worst images.
  for (const EvalReport& report : reports) {
    if (!report.analysis) continue;
    const std::vector<std::string> written = write_report_pictures(report, model_dir + "/eval");
    if (!written.empty())
      print_output(str("evaluation pictures (", written.size(), " files) written to ",
                       pictures_dir(model_dir + "/eval", report), "/\n"));
  }
  return 0;
}

}  // namespace detseg::cli
