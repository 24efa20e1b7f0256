// Implements: detseg's checkpoint file format (.dsckpt: magic, version, JSON header, raw tensor
// bytes, CRC32C footer), written atomically, and a manager for model_dir/ that keeps numbered
// checkpoints, an index of the latest, and only the newest N. Also the adapters that turn a
// module, an optimizer and the RNG into the named tensors and bytes a checkpoint stores.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "detseg/io/named_tensors.h"
#include "detseg/train/torch_fwd.h"

namespace detseg {

constexpr uint32_t kCheckpointVersion = 1;
constexpr const char* kCheckpointExtension = ".dsckpt";

struct Checkpoint {
  int64_t step = 0;
  NamedTensors model;                // parameters and buffers, module order
  NamedTensors ema;                  // EMA averages; empty when EMA is off
  NamedTensors rng;                  // generator states: {"cpu", uint8 state}, and "cuda:N" per GPU
  NamedTensors loop;                 // training-loop state, e.g. the fp16 loss scale
  std::string optimizer;             // torch::serialize archive bytes; empty when not saved
  std::string metadata_json = "{}";  // a small JSON object (config name, version, metrics...)
};

// Called while a checkpoint is written, after each chunk, with the bytes written so far and the
// total; tests use it to kill a writer mid-save.
using WriteProgressHook = std::function<void(size_t written, size_t total)>;

// Writes to `path.tmp.<pid>`, fsyncs, renames over `path`, fsyncs the folder.
void write_checkpoint(const std::string& path, const Checkpoint& checkpoint,
                      const WriteProgressHook& hook = {});
// Throws Error naming the file when it is missing, foreign, truncated, corrupt or too new.
Checkpoint read_checkpoint(const std::string& path);
// The metadata JSON alone (what `detseg train` stores: model type, class names, category ids),
// reading only the file's header: a cheap look before the weights are loaded. Throws Error naming
// the file when it is not a checkpoint or its header is cut short or not JSON; the weights' CRC is
// checked only by read_checkpoint.
std::string read_checkpoint_metadata(const std::string& path);
// The class names `detseg train` stored in a checkpoint's metadata, in label order; empty when the
// metadata has none (a checkpoint written by an older detseg or by the API without them).
std::vector<std::string> checkpoint_class_names(const std::string& path);
// True when the file starts with the checkpoint magic (cheap sniffing, no validation).
bool is_checkpoint_file(const std::string& path);

// ---- adapters
NamedTensors module_state(const torch::nn::Module& module);  // named parameters, then buffers
// Copies `state` into the module. Every module tensor must be present with the same shape and no
// extra names may appear; otherwise Error listing them (prefixed with `what`, e.g. the file).
void load_module_state(torch::nn::Module& module, const NamedTensors& state,
                       const std::string& what);
std::string optimizer_state_bytes(torch::optim::Optimizer& optimizer);
void load_optimizer_state(torch::optim::Optimizer& optimizer, const std::string& bytes);
NamedTensors rng_states();  // {"cpu": default CPU generator state}
void restore_rng_states(const NamedTensors& states);

// ---- whole training state
class WeightEma;

// What a resumable checkpoint holds: model state, optimizer state (when given), EMA averages
// (when given) and the RNG states.
Checkpoint capture_training_state(int64_t step, const torch::nn::Module& model,
                                  torch::optim::Optimizer* optimizer, const WeightEma* ema,
                                  std::string metadata_json = "{}");
// Restores model, optimizer (when given and saved), EMA (when given and saved), RNG states and,
// into *loop_state when given, the loop section from `path`; returns the checkpoint's step, from
// which training continues. Tensors land on the model's device, whichever device wrote them.
int64_t restore_training_state(const std::string& path, torch::nn::Module& model,
                               torch::optim::Optimizer* optimizer, WeightEma* ema,
                               NamedTensors* loop_state = nullptr);
// For evaluation and export: the model state, then the EMA averages over it when the checkpoint
// has them (use_ema). Returns the step.
int64_t load_weights_for_eval(const std::string& path, torch::nn::Module& model,
                              bool use_ema = true);

// ---- model_dir/ management
struct CheckpointManagerOptions {
  std::string model_dir;
  int keep = 7;  // newest N kept; older ones deleted after each save (0: keep all)
  int64_t save_every_steps = 1000;
};

struct CheckpointEntry {
  int64_t step = 0;
  std::string path;
};

class CheckpointManager {
 public:
  explicit CheckpointManager(CheckpointManagerOptions options);

  std::string path_for_step(int64_t step) const;  // model_dir/ckpt-<step>.dsckpt
  // True when `step` is a multiple of save_every_steps (the loop also saves at the last step).
  bool due(int64_t step) const;
  // Writes ckpt-<step>, updates the index, deletes the oldest beyond `keep` and stale temp files.
  std::string save(const Checkpoint& checkpoint, const WriteProgressHook& hook = {});
  // The latest complete checkpoint: the index's entry when its file exists, else the highest step.
  std::optional<std::string> latest() const;
  std::vector<CheckpointEntry> list() const;  // ascending step
  const CheckpointManagerOptions& options() const { return options_; }
  std::string index_path() const;  // model_dir/checkpoint_index.json

 private:
  CheckpointManagerOptions options_;
};

// Continuous evaluation (the reference's eval_continuously): yields each new latest checkpoint
// of a training run once, and stops after wait_interval_s seconds without a new one.
struct CheckpointWatchOptions {
  std::string checkpoint_dir;
  double wait_interval_s = 180;            // give up after this long with nothing new
  double poll_interval_s = 1.0;            // how often the folder is checked
  double first_checkpoint_timeout_s = -1;  // before the first checkpoint; < 0 waits forever
};

class CheckpointWatcher {
 public:
  explicit CheckpointWatcher(CheckpointWatchOptions options);
  // Blocks until the run's latest checkpoint differs from the one returned before and returns
  // it (checkpoints written meanwhile and already superseded are skipped, as the reference);
  // nullopt once the wait runs out.
  std::optional<std::string> next();

 private:
  CheckpointWatchOptions options_;
  std::optional<std::string> last_;
};

// True when `model_dir` holds at least one checkpoint of ours (fine-tuning must then not run).
bool model_dir_has_checkpoint(const std::string& model_dir);

}  // namespace detseg
