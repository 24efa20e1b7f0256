// Implements: initialising a model from another checkpoint (ours or a torch.save .pth) before
// training, as the reference's fine-tune checkpoints: detection (all variables or only the
// feature extractor) or classification (backbone only), a scope map between our names and the
// checkpoint's, an exclusion pattern, and a summary of what was loaded, skipped and mismatched.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "detseg/io/named_tensors.h"
#include "detseg/train/fine_tune_options.h"
#include "detseg/train/torch_fwd.h"

namespace detseg {

enum class FineTuneType { kDetection, kClassification };
FineTuneType parse_fine_tune_type(const std::string& name);  // detection|classification

struct FineTuneSummary {
  std::vector<std::string> loaded;                           // our names
  std::vector<std::pair<std::string, std::string>> skipped;  // our name, why
  std::vector<std::string> mismatched;  // "ours: [..] vs checkpoint 'theirs': [..]"
  size_t outside_scope = 0;             // our tensors the type does not restore
  size_t unused_in_checkpoint = 0;      // checkpoint tensors nothing mapped to
  std::string to_string() const;        // a few lines for the log
};

// The named tensors of a weights file: our checkpoint format when it has our magic, safetensors
// when the name ends in .safetensors, otherwise a torch.save zip. Throws Error naming the file.
NamedTensors read_weights_file(const std::string& path, const std::string& pth_key = "",
                               bool use_ema = false);

// Copies the selected, mapped tensors of `source` into `model` (dtype converted, under no-grad).
// Throws Error listing the offenders when names are missing or shapes differ and the options do
// not allow skipping them; nothing is copied then.
FineTuneSummary apply_fine_tune(torch::nn::Module& model, const NamedTensors& source,
                                const FineTuneOptions& options);

// The reference's rule: fine-tune only when a checkpoint is configured and model_dir has no
// checkpoint of its own (a resumed run must not be overwritten with the initial weights).
bool should_fine_tune(const FineTuneOptions& options, const std::string& model_dir);

// read_weights_file + apply_fine_tune.
FineTuneSummary fine_tune_from_checkpoint(torch::nn::Module& model, const FineTuneOptions& options);

}  // namespace detseg
