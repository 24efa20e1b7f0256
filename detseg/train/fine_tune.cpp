// Implements: fine-tune checkpoint loading declared in fine_tune.h.
#include "detseg/train/fine_tune.h"

#include <torch/nn/module.h>

#include <regex>
#include <set>
#include <sstream>
#include <unordered_map>

#include "detseg/core/error.h"
#include "detseg/io/pth_reader.h"
#include "detseg/io/safetensors.h"
#include "detseg/train/checkpoint.h"
#include "detseg/train/name_pattern.h"

namespace detseg {
namespace {

std::string join_some(const std::vector<std::string>& items, size_t limit = 8) {
  std::string s;
  for (size_t i = 0; i < items.size() && i < limit; ++i) s += (i ? "; " : "") + items[i];
  if (items.size() > limit) s += str("; ... (", items.size(), " in all)");
  return s;
}

}  // namespace

FineTuneType parse_fine_tune_type(const std::string& name) {
  if (name == "detection") return FineTuneType::kDetection;
  if (name == "classification") return FineTuneType::kClassification;
  throw ConfigError(
      str("unknown fine-tune checkpoint type '", name, "' (valid: detection, classification)"));
}

std::string FineTuneSummary::to_string() const {
  std::ostringstream os;
  os << "fine-tune: loaded " << loaded.size() << ", skipped " << skipped.size()
     << ", shape mismatches " << mismatched.size() << ", outside the restored scope "
     << outside_scope << ", unused checkpoint tensors " << unused_in_checkpoint;
  for (const auto& [name, why] : skipped) os << "\n  skipped " << name << ": " << why;
  for (const auto& m : mismatched) os << "\n  mismatch " << m;
  return os.str();
}

NamedTensors read_weights_file(const std::string& path, const std::string& pth_key, bool use_ema) {
  if (is_checkpoint_file(path)) {
    Checkpoint ckpt = read_checkpoint(path);
    if (use_ema && !ckpt.ema.empty()) {
      // EMA covers parameters and float buffers; integer buffers come from the model section.
      std::set<std::string> in_ema;
      for (const auto& kv : ckpt.ema) in_ema.insert(kv.first);
      NamedTensors out = ckpt.ema;
      for (auto& kv : ckpt.model)
        if (!in_ema.count(kv.first)) out.push_back(kv);
      return out;
    }
    return ckpt.model;
  }
  const std::string ext = ".safetensors";
  if (path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
    return read_safetensors(path);
  return read_pth_state_dict(path, pth_key);
}

FineTuneSummary apply_fine_tune(torch::nn::Module& model, const NamedTensors& source,
                                const FineTuneOptions& options) {
  const FineTuneType type = parse_fine_tune_type(options.type);
  const std::regex feature_re =
      compile_name_pattern(options.feature_extractor_pattern, "fine-tune feature extractor");
  const bool has_exclude = !options.exclude_pattern.empty();
  const std::regex exclude_re =
      compile_name_pattern(has_exclude ? options.exclude_pattern : "$^", "fine-tune exclude");
  std::vector<std::pair<std::regex, std::string>> rules;
  for (const auto& r : options.scope_map)
    rules.emplace_back(compile_name_pattern(r.pattern, "fine-tune scope map"), r.replacement);
  const bool all_vars = type == FineTuneType::kDetection && options.load_all_detection_vars;

  std::unordered_map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, t] : source) by_name[name] = &t;
  std::set<std::string> used;
  FineTuneSummary summary;
  std::vector<std::string> missing;
  std::vector<std::pair<at::Tensor, const at::Tensor*>> copies;
  for (auto& [name, target] : module_state(model)) {
    if (!all_vars && !std::regex_search(name, feature_re)) {
      ++summary.outside_scope;
      continue;
    }
    if (has_exclude && std::regex_search(name, exclude_re)) {
      summary.skipped.emplace_back(name, "excluded by pattern");
      continue;
    }
    std::string theirs = name;
    for (const auto& [re, repl] : rules)
      theirs = std::regex_replace(theirs, re, repl, std::regex_constants::format_first_only);
    auto it = by_name.find(theirs);
    if (it == by_name.end()) {
      summary.skipped.emplace_back(name, str("not in checkpoint (looked up as '", theirs, "')"));
      missing.push_back(str(name, " (as '", theirs, "')"));
      continue;
    }
    used.insert(theirs);
    if (it->second->sizes() != target.sizes()) {
      summary.mismatched.push_back(
          str(name, ": ", target.sizes(), " vs checkpoint '", theirs, "': ", it->second->sizes()));
      continue;
    }
    summary.loaded.push_back(name);
    copies.emplace_back(target, it->second);
  }
  for (const auto& [name, t] : source)
    if (!used.count(name)) ++summary.unused_in_checkpoint;
  DETSEG_CHECK(options.skip_missing || missing.empty(), options.checkpoint,
               ": fine-tune checkpoint lacks ", missing.size(), " tensors: ", join_some(missing),
               "; HINT: fix the scope map, or set skip_missing");
  DETSEG_CHECK(options.skip_mismatched || summary.mismatched.empty(), options.checkpoint,
               ": fine-tune shape mismatch for ", summary.mismatched.size(),
               " tensors: ", join_some(summary.mismatched),
               "; HINT: exclude them or set skip_mismatched");
  torch::NoGradGuard no_grad;
  for (auto& [target, src] : copies) target.copy_(*src);
  return summary;
}

bool should_fine_tune(const FineTuneOptions& options, const std::string& model_dir) {
  return !options.checkpoint.empty() && !model_dir_has_checkpoint(model_dir);
}

FineTuneSummary fine_tune_from_checkpoint(torch::nn::Module& model,
                                          const FineTuneOptions& options) {
  DETSEG_CONFIG_CHECK(!options.checkpoint.empty(), "fine-tune: no checkpoint path given");
  return apply_fine_tune(
      model, read_weights_file(options.checkpoint, options.pth_key, options.use_ema), options);
}

}  // namespace detseg
