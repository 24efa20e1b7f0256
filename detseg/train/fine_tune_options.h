// Implements: the fine-tuning options, one struct for both the pipeline config (train.fine_tune.*,
// declared in config.cpp) and train/fine_tune.h. Torch-free so config.h can hold it. Defaults are
// the config's.
#pragma once

#include <string>
#include <vector>

namespace detseg {

// Rewrites one of our names into the checkpoint's: std::regex_replace of the first match.
// A prefix map is {"^backbone\\.body\\.", ""}. In the config: an "ours=theirs" prefix string,
// read as {"^ours", "theirs"}.
struct ScopeRule {
  std::string pattern;
  std::string replacement;
};

struct FineTuneOptions {
  std::string checkpoint;          // .dsckpt, .safetensors or torch.save file; empty: none
  std::string type = "detection";  // detection|classification
  // detection: load every variable (true) or only the feature extractor (false, the reference's
  // default). classification always loads only the feature extractor. Config: all_variables.
  bool load_all_detection_vars = false;
  std::string feature_extractor_pattern = R"(^backbone\.)";  // regex_search on our names
  std::vector<ScopeRule> scope_map;                          // applied in order
  std::string exclude_pattern;   // our names matching it are not loaded (config: exclude)
  bool skip_missing = true;      // a selected name absent from the checkpoint: skip or Error
  bool skip_mismatched = false;  // a shape mismatch: skip or Error
  std::string pth_key;           // for .pth files, see read_pth_state_dict
  bool use_ema = false;          // for .dsckpt files: the EMA weights when present
  // A checkpoint of ours names its classes. When its class layers are loaded (detection,
  // all_variables), the training data's classes meet them by name: "match" needs the same classes
  // (any order; training adopts the checkpoint's order so the class rows line up), "drop" starts
  // the class layers afresh (any classes). class_map renames ours to theirs first: "car=vehicle".
  std::string classes = "match";
  std::vector<std::string> class_map;
};

}  // namespace detseg
