// Implements: the detseg subcommands' arguments and bodies. main.cpp owns the whole command-line
// grammar (CLI11 is parsed in that one file: its header costs ~15 s per file that includes it);
// each cli/cmd_*.cpp holds one run_* body that calls the library and returns the exit code.
// Exit codes: 0 success, 2 usage/config error (throw ConfigError), 1 runtime failure (throw Error).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace detseg::cli {

struct TrainArgs {
  std::string config;
  std::string model_dir;
  std::vector<std::string> overrides;  // --set key=value
  int nproc = 0;                       // local data-parallel workers (0: one per visible GPU on a CUDA device, else 1)
};

struct EvalArgs {
  std::string config;
  std::string checkpoint;  // one checkpoint file, or
  std::string model_dir;   // the latest checkpoint in a model directory
  std::string json_out;
  std::string detections_out;  // COCO results file; default <checkpoint folder>/eval/detections-<step>.json
  bool no_metrics = false;
  std::string eval_set;  // only this evaluation set ("eval" = eval_input); default: every set
  std::vector<std::string> overrides;
  bool continuous = false;
  std::string checkpoint_dir;
  double wait_interval = 60;
};

struct PredictArgs {
  std::string config;
  std::string checkpoint;
  std::string input;   // an image, a folder of images, a video, a camera device or a stream URL
  std::string output;  // folder for detections JSON and drawings (or JSON Lines and the annotated video)
  std::vector<std::string> overrides;
  double score_threshold = 0.3;
  int64_t batch = 1;             // images (or tiles) per forward pass
  int64_t tile = -1;             // -1: the config's postprocess.tile_size
  double tile_overlap = -1;      // -1: the config's postprocess.tile_overlap
  int64_t every_nth_frame = 1;   // videos
  bool no_draw = false;          // JSON only: no pictures, no annotated video
};

struct CocoEvalArgs {
  std::string gt;
  std::string dt;
  std::string iou_type = "bbox";
  std::string json_out;
  std::string images;  // predict's images.json: the ids and file names the detections were numbered with
  bool per_class = false;
  bool class_agnostic = false;
};

struct ConvertVocArgs {
  std::string voc_dir;
  std::string output;
  std::string split;  // ImageSets/Main/<split>.txt, empty: every annotation file
  std::string label_map;
};

struct PlotArgs {
  std::string run_dir;  // a model dir: metrics.jsonl and/or eval/metrics.jsonl
  std::string out_dir;  // default: <run_dir>/plots
  int width = 900;
  int height = 500;
};

int run_train(const TrainArgs& args);
int run_eval(const EvalArgs& args);
int run_predict(const PredictArgs& args);
int run_coco_eval(const CocoEvalArgs& args);
int run_convert_voc(const ConvertVocArgs& args);
struct ConvertYoloArgs {
  std::string data_yaml;
  std::string output;
  std::string split = "train";
};
int run_convert_yolo(const ConvertYoloArgs& args);
struct InfoArgs {
  bool config_keys = false;
  bool resolved = false;
  std::string config;
  std::vector<std::string> overrides;
};
int run_info(const InfoArgs& args);
// The torch-free parts of `info` (--config-keys, --resolved); false when `args` asks for neither.
bool run_config_info(const InfoArgs& args);
int run_plot(const PlotArgs& args);
struct ExportArgs {
  std::string config;
  std::string checkpoint;
  std::string format = "safetensors";
  std::string output;
  int64_t height = 0, width = 0;
  std::vector<std::string> overrides;
};
int run_export(const ExportArgs& args);
struct FetchArgs {
  std::string source;  // a URL or a path, or
  std::string config;  // the model.pretrained of this config
  std::string sha256;  // with `source`: its SHA-256 or first 8+ hex digits
  std::vector<std::string> overrides;
};
// Torch-free: both binaries run it in-process.
int run_fetch(const FetchArgs& args);
struct CheckDataArgs {
  std::string config;
  std::vector<std::string> overrides;
};
// 0 when every input is clean or only has what its policies let pass, 1 when they would stop.
int run_check_data(const CheckDataArgs& args);
struct AugmentArgs {
  std::string config;
  std::string out_dir;
  int64_t count = 16;  // examples drawn
  int64_t step = 0;    // the training step (batch) they are taken from
  std::vector<std::string> overrides;
};
// Writes out_dir/augment.png: train_input's examples as the training loader augments them.
int run_augment(const AugmentArgs& args);

}  // namespace detseg::cli
