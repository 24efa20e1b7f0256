// Implements: the `detseg` entry point: the whole command-line grammar, global flags, and the
// exit-code contract (0 success, 2 usage/config error, 1 runtime failure).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <functional>

#include "cli/commands.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/log.h"
#include "detseg/core/out_of_memory.h"
#include "detseg/core/malloc_reuse.h"
#include "detseg/core/stop_signal.h"
#include "detseg/core/threads.h"

namespace {

using namespace detseg::cli;
using detseg::str;

// The one line a failed command ends with: on stderr, and in the run's log file when there is one.
void report_failure(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  detseg::append_to_log_file(line);
}

// Flag checks that say what the flag takes in our words: CLI11's own print its internals ("Value -1
// not in range 0.000000 to 1797693134862315708145274237317043567981..."). CLI11 prefixes the flag.
std::string number_range(double lo, double hi) {
  if (hi == INT64_MAX || std::isinf(hi)) return str(">= ", lo);
  return str("in [", lo, ", ", hi, "]");
}

CLI::Validator whole_number(int64_t lo, int64_t hi = INT64_MAX) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (!text.empty() && *end == '\0' && errno == 0 && v >= lo && v <= hi) return "";
        return str("expected a whole number ", number_range(static_cast<double>(lo), static_cast<double>(hi)), ", got \"",
                   text, "\"");
      },
      hi == INT64_MAX ? str(">= ", lo) : str("[", lo, ", ", hi, "]"));
}

// NaN compares false with every bound, so it is refused with the out-of-range values.
CLI::Validator number_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (!text.empty() && *end == '\0' && v >= lo && v <= hi) return "";
        return str("expected a number ", number_range(lo, hi), ", got \"", text, "\"");
      },
      std::isinf(hi) ? str(">= ", lo) : str("[", lo, ", ", hi, "]"));
}

CLI::Validator one_of(std::vector<std::string> names) {
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  return CLI::Validator(
      [names, list](std::string& text) -> std::string {
        for (const std::string& n : names)
          if (text == n) return "";
        return "expected one of " + list + ", got \"" + text + "\"";
      },
      list);
}

CLI::Validator existing_file() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        if (const std::string why = detseg::why_unreadable(path); !why.empty())
          return path + ": " + (why == "no such file or folder" ? "no such file" : why);
        return detseg::is_directory(path) ? path + ": is a folder, expected a file" : "";
      },
      "FILE");
}

// "detseg convert voc": the subcommands the command line reached, for the --help hint.
std::string command_path(const CLI::App& app) {
  std::string path = "detseg";
  const CLI::App* at = &app;
  for (;;) {
    const auto parsed = at->get_subcommands();
    if (parsed.empty()) return path;
    at = parsed.front();
    path += " " + at->get_name();
  }
}

// CLI11's error in our words, one line, with the hint where the flags are listed.
std::string parse_error_line(const CLI::ParseError& e, const CLI::App& app) {
  const std::string what = e.what(), at = command_path(app);
  // (By type: get_name() holds a subcommand's name for some of CLI11's errors.)
  auto is = [&e](auto* type) { return dynamic_cast<decltype(type)>(&e) != nullptr; };
  std::string subcommands;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    subcommands += (subcommands.empty() ? "" : ", ") + sub->get_name();
  std::string line;
  if (is(static_cast<const CLI::RequiredError*>(nullptr)) && what.rfind("A subcommand", 0) == 0) {
    // An unknown word where the subcommand goes is left over, not an error of its own.
    const std::vector<std::string> left = app.remaining();
    if (at == "detseg" && !left.empty() && left.front().rfind('-', 0) != 0)
      line = left.front() + ": not a subcommand (" + subcommands + ")";
    else
      line = at == "detseg" ? "a subcommand is required: " + subcommands : "a subcommand is required";
  } else if (is(static_cast<const CLI::ExtrasError*>(nullptr))) {
    const std::string args = what.substr(what.find(": ") + 2);
    const std::string first = args.substr(0, args.find(' '));
    if (first.rfind('-', 0) == 0)
      line = "unknown flag " + args;
    else if (at == "detseg")
      line = first + ": not a subcommand (" + subcommands + ")";
    else
      line = "unexpected argument" + std::string(args.find(' ') == std::string::npos ? " " : "s ") + args;
  } else if (is(static_cast<const CLI::ArgumentMismatch*>(nullptr)) && what.find("missing") != std::string::npos) {
    line = what.substr(0, what.find(':')) + ": needs a value";
  } else if (is(static_cast<const CLI::ExcludesError*>(nullptr))) {
    const size_t split = what.find(" excludes ");
    line = what.substr(0, split) + " and " + what.substr(split + 10) + " exclude each other: give one";
  } else if (is(static_cast<const CLI::ConversionError*>(nullptr)) && what.rfind("Could not convert: ", 0) == 0) {
    const std::string rest = what.substr(19);
    const size_t eq = rest.find(" = ");
    line = rest.substr(0, eq) + ": cannot read \"" + (eq == std::string::npos ? "" : rest.substr(eq + 3)) + "\"";
  } else {
    line = what;  // a sentence of CLI11's ("--config is required"): lower-cased like ours, acronyms kept
    if (line.size() > 1 && std::islower(static_cast<unsigned char>(line[1])))
      line[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(line[0])));
  }
  return line + "; see `" + at + " --help`";
}

void add_overrides(CLI::App* app, std::vector<std::string>& overrides) {
  app->add_option("--set", overrides, "Override a config key: --set train.batch_size=4 (repeatable)");
  // --device is the config's `device` key; given last, it wins over a --set of the same key.
  app->add_option_function<std::string>(
      "--device", [&overrides](const std::string& device) { overrides.push_back("device=" + device); },
      "auto, cpu, cuda or cuda:N (default: the config's device, auto: cuda:LOCAL_RANK when a GPU is visible)");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace detseg;
  keep_freed_memory_for_reuse();  // before the first tensor: detseg/core/malloc_reuse.h
  CLI::App app{"detseg: train, evaluate and run object detectors and semantic-segmentation models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("detseg ") + DETSEG_VERSION);
  int threads = 0;
  bool verbose = false, quiet = false;
  app.add_option("--threads", threads, "Intra-op threads (default 0: all cores)")
      ->check(whole_number(0, 1024));
  app.add_flag("-v,--verbose", verbose, "Debug logging");
  app.add_flag("-q,--quiet", quiet, "Warnings and errors only");
  std::function<int()> run;

  TrainArgs train;
  auto* train_app = app.add_subcommand("train", "Train a model from a pipeline config");
  train_app->add_option("--config", train.config, "Pipeline config (YAML)")->required()->check(existing_file());
  train_app->add_option("--model-dir", train.model_dir, "Where checkpoints, logs and the resolved config go")->required();
  add_overrides(train_app, train.overrides);
  train_app->add_option("--nproc", train.nproc, "Local data-parallel worker processes (default: one per visible GPU when training on the GPU, else 1)")->check(whole_number(1, 1024));
  train_app->callback([&] { run = [&] { return run_train(train); }; });

  EvalArgs eval;
  auto* eval_app = app.add_subcommand("eval", "Evaluate a checkpoint: COCO metrics or mIoU, and eval losses");
  eval_app->add_option("--config", eval.config, "Pipeline config (YAML)")->required()->check(existing_file());
  auto* ckpt = eval_app->add_option("--checkpoint", eval.checkpoint, "Checkpoint file to evaluate");
  auto* mdir = eval_app->add_option("--model-dir", eval.model_dir, "Evaluate the latest checkpoint in this folder");
  eval_app->add_option("--json", eval.json_out, "Write the metrics (detectors: \"stats\", the 12 COCO numbers; segmenters: mIoU, per-class IoU, pixel accuracy) to this JSON file");
  eval_app->add_option("--detections", eval.detections_out,
                       "Write the detections in COCO results format to this file (default: <checkpoint folder>/eval/"
                       "detections-<step>.json)");
  eval_app->add_option("--eval-set", eval.eval_set,
                       "Evaluate only this set: eval (eval_input), a name under eval_inputs, or train (eval.on_train)");
  eval_app->add_flag("--no-metrics", eval.no_metrics,
                     "Only write the detections (images without ground truth, e.g. a COCO test-dev image list)");
  eval_app->add_flag("--continuous", eval.continuous, "Evaluate each new checkpoint in --checkpoint-dir once");
  eval_app->add_option("--checkpoint-dir", eval.checkpoint_dir, "Folder watched by --continuous");
  eval_app->add_option("--wait-interval", eval.wait_interval, "With --continuous: stop after this many seconds with no new checkpoint")
      ->check(number_in(0, HUGE_VAL));
  add_overrides(eval_app, eval.overrides);
  ckpt->excludes(mdir);
  eval_app->callback([&] { run = [&] { return run_eval(eval); }; });

  PredictArgs predict;
  auto* predict_app = app.add_subcommand("predict", "Run a checkpoint on images; write detections JSON and drawings (detectors) or colour label maps and overlays (segmenters)");
  predict_app->add_option("--config", predict.config, "Pipeline config (YAML); not needed for an exported TorchScript model")
      ->check(existing_file());
  predict_app->add_option("--checkpoint", predict.checkpoint, "Checkpoint file, or a model from `detseg export --format torchscript`")
      ->required();
  predict_app->add_option("--input", predict.input,
                          "An image, a folder of images, a video file, a camera device (/dev/video0) or a stream URL "
                          "(rtsp://, http://)")
      ->required();
  predict_app->add_option("--output", predict.output, "Output folder")->required();
  auto* draw_threshold =
      predict_app
          ->add_option("--draw-threshold", predict.score_threshold,
                       "Draw detections scoring at least this (default 0.3); detections.json keeps every detection "
                       "(those above postprocess.score_threshold)")
          ->check(number_in(0, 1));
  predict_app->add_option("--score-threshold", predict.score_threshold, "The older name of --draw-threshold")
      ->check(number_in(0, 1))
      ->excludes(draw_threshold);
  predict_app->add_option("--batch", predict.batch,
                          "Detectors: images (or tiles) per forward pass; decoding and writing run on threads of their own")
      ->check(whole_number(1, 1024));
  predict_app->add_option("--tile", predict.tile,
                          "Detectors: cut each image into tiles of this many pixels square and merge the detections "
                          "(postprocess.tile_size; 0: whole images)")
      ->check(whole_number(0, 65536));
  predict_app->add_option("--tile-overlap", predict.tile_overlap,
                          "With --tile: the fraction of a tile neighbouring tiles share (postprocess.tile_overlap, 0.2)")
      ->check(number_in(0, 0.9));
  predict_app->add_option("--every-nth-frame", predict.every_nth_frame, "Videos and streams: predict frames 0, N, 2N, ...")
      ->check(whole_number(1));
  predict_app->add_flag("--no-draw", predict.no_draw,
                        "Write the detections (or segmenters' class-id PNGs) only: no drawn pictures, overlays or "
                        "annotated video");
  add_overrides(predict_app, predict.overrides);
  predict_app->callback([&] { run = [&] { return run_predict(predict); }; });

  CocoEvalArgs coco;
  auto* coco_app = app.add_subcommand("coco-eval", "COCO metrics of a results JSON against ground truth (pycocotools' numbers)");
  coco_app->add_option("--gt", coco.gt, "Ground truth: COCO instances JSON")->required();
  coco_app->add_option("--dt", coco.dt, "Detections: COCO results JSON")->required();
  coco_app->add_option("--iou-type", coco.iou_type, "bbox or segm")->check(one_of({"bbox", "segm"}));
  coco_app->add_option("--json", coco.json_out, "Write \"stats\" (12 numbers) and per-category AP to this file");
  coco_app->add_option("--images", coco.images,
                       "Check the detections' image ids against this table of ids and file names (predict's images.json)")
      ->check(existing_file());
  coco_app->add_flag("--per-class", coco.per_class, "Print a per-category AP table");
  coco_app->add_flag("--class-agnostic", coco.class_agnostic, "Ignore categories when matching (useCats=0)");
  coco_app->callback([&] { run = [&] { return run_coco_eval(coco); }; });

  ConvertVocArgs voc;
  auto* convert_app = app.add_subcommand("convert", "Convert datasets to COCO JSON");
  convert_app->require_subcommand(1);
  auto* voc_app = convert_app->add_subcommand("voc", "Pascal VOC folder (Annotations/, JPEGImages/) to COCO instances JSON");
  voc_app->add_option("VOC_DIR", voc.voc_dir, "Folder holding Annotations/ and JPEGImages/")->required();
  voc_app->add_option("-o,--output", voc.output, "Output COCO JSON")->required();
  voc_app->add_option("--split", voc.split, "Use ImageSets/Main/<split>.txt (default: every annotation)");
  voc_app->add_option("--label-map", voc.label_map, "Class names in order, one per line (default: sorted names found)");
  voc_app->callback([&] { run = [&] { return run_convert_voc(voc); }; });
  ConvertYoloArgs yolo;
  auto* yolo_app = convert_app->add_subcommand("yolo", "Ultralytics YOLO data set (data.yaml, images/, labels/) to COCO instances JSON");
  yolo_app->add_option("DATA_YAML", yolo.data_yaml, "The data set's data.yaml (path, train/val/test, names)")->required();
  yolo_app->add_option("-o,--output", yolo.output, "Output COCO JSON")->required();
  yolo_app->add_option("--split", yolo.split, "The data.yaml key of the images to convert (default: train)");
  yolo_app->callback([&] { run = [&] { return run_convert_yolo(yolo); }; });

  ExportArgs exp;
  auto* export_app = app.add_subcommand("export", "Export a checkpoint: TorchScript or ONNX (the traced network, for other runtimes and `predict`), or safetensors weights (torchvision's names)");
  export_app->add_option("--config", exp.config, "Pipeline config (YAML)")->required()->check(existing_file());
  export_app->add_option("--checkpoint", exp.checkpoint, "Checkpoint to export (its EMA weights when it has them)")->required();
  export_app->add_option("--format", exp.format, "torchscript | onnx | safetensors")
      ->check(one_of({"torchscript", "onnx", "safetensors"}));
  export_app->add_option("-o,--output", exp.output, "Output file")->required();
  export_app->add_option("--height", exp.height, "Traced input height (default: the model's input size)")->check(whole_number(1));
  export_app->add_option("--width", exp.width, "Traced input width (default: the model's input size)")->check(whole_number(1));
  add_overrides(export_app, exp.overrides);
  export_app->callback([&] { run = [&] { return run_export(exp); }; });

  PlotArgs plot;
  auto* plot_app = app.add_subcommand("plot", "Render a run's loss, learning-rate and AP curves to PNG");
  plot_app->add_option("RUN_DIR", plot.run_dir, "Model dir holding metrics.jsonl (and eval/metrics.jsonl)")->required();
  plot_app->add_option("--out", plot.out_dir, "Output folder (default: RUN_DIR/plots)");
  plot_app->add_option("--width", plot.width, "Chart width in pixels")->check(whole_number(200, 8000));
  plot_app->add_option("--height", plot.height, "Chart height in pixels")->check(whole_number(150, 8000));
  plot_app->callback([&] { run = [&] { return run_plot(plot); }; });

  FetchArgs fetch;
  auto* fetch_app = app.add_subcommand(
      "fetch", "Download pretrained weights into the cache ($DETSEG_HOME/weights, default ~/.cache/detseg/weights), "
               "verify their SHA-256 and print the local path");
  fetch_app->add_option("SOURCE", fetch.source, "URL (http, https, file) or path of the weights");
  fetch_app->add_option("--sha256", fetch.sha256,
                        "SHA-256 or its first 8+ hex digits (default: the -<hex>. in a torchvision file name)");
  fetch_app->add_option("--config", fetch.config, "Fetch this config's model.pretrained instead")
      ->check(existing_file());
  fetch_app->add_option("--set", fetch.overrides, "With --config: override a config key (repeatable)");
  fetch_app->callback([&] { run = [&] { return run_fetch(fetch); }; });

  CheckDataArgs check;
  auto* check_app = app.add_subcommand(
      "check-data", "Read every image and annotation of the config's inputs once and list every problem: missing, "
                    "undecodable or damaged images, sizes that disagree with the annotations (EXIF orientation "
                    "included), boxes outside their image; exit 1 when the config's policies would stop on one");
  check_app->add_option("--config", check.config, "Pipeline config (YAML)")->required()->check(existing_file());
  add_overrides(check_app, check.overrides);
  check_app->callback([&] { run = [&] { return run_check_data(check); }; });

  AugmentArgs augment;
  auto* augment_app = app.add_subcommand(
      "augment", "Draw train_input's images as training augments them (train_input.augment): a grid PNG with boxes, "
                 "class names, masks and label maps, OUT/augment.png");
  augment_app->add_option("--config", augment.config, "Pipeline config (YAML)")->required()->check(existing_file());
  augment_app->add_option("--out", augment.out_dir, "Output folder (created)")->required();
  augment_app->add_option("--count", augment.count, "Images drawn")->check(whole_number(1, 256));
  augment_app->add_option("--step", augment.step,
                          "The training step the images are taken from (its batches and seeds; mosaic's "
                          "off_last_steps)")
      ->check(whole_number(0));
  add_overrides(augment_app, augment.overrides);
  augment_app->callback([&] { run = [&] { return run_augment(augment); }; });

  InfoArgs info;
  auto* info_app = app.add_subcommand("info", "Print versions, thread count, BLAS and CUDA availability");
  info_app->add_flag("--config-keys", info.config_keys, "Print every pipeline-config key (Markdown table) instead");
  info_app->add_option("--config", info.config, "With --resolved: the config to print");
  info_app->add_flag("--resolved", info.resolved,
                     "Print --config with its _base_ configs merged, --set applied and every default filled in");
  add_overrides(info_app, info.overrides);
  info_app->callback([&] { run = [&] { return run_info(info); }; });

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const CLI::ParseError& e) {
    report_failure("detseg: error: " + parse_error_line(e, app));
    return 2;
  }
  // "train", "convert voc": which command ran out of memory, when one does.
  const std::string path = command_path(app), command = path.substr(std::min<size_t>(path.size(), 7));
  if (verbose) set_log_level(LogLevel::kDebug);
  if (quiet) set_log_level(LogLevel::kWarn);
  try {
    set_threads(threads);
    return run ? run() : 2;
  } catch (const Interrupted& e) {
    report_failure(str("detseg: ", e.what()));
    return 128 + e.signal();
  } catch (const ConfigError& e) {
    report_failure(str("detseg: error: ", e.what()));
    return 2;
  } catch (const Error& e) {
    report_failure(str("detseg: error: ", e.what()));
    return 1;
  } catch (const std::bad_alloc&) {
    report_failure(str("detseg: error: ", command, ": out of memory"));
    return 1;
  } catch (const std::exception& e) {
    // An allocation that failed (LibTorch's CPU or CUDA allocator, detseg's guard): its size, in
    // our words.
    if (const std::string oom = out_of_memory_text(e.what()); !oom.empty()) {
      report_failure(str("detseg: error: ", command, ": ", oom));
      return 1;
    }
    // Not one of detseg's own errors: a library's (LibTorch's carry a C++ backtrace). Its first
    // line is the useful part; the rest is for developers (--verbose shows it).
    std::string what = e.what();
    if (log_level() != LogLevel::kDebug) what = what.substr(0, what.find('\n'));
    report_failure("detseg: error: internal: " + what);
    return 1;
  }
}
