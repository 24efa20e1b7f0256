// Implements: loading a PyTorch state dict into a torch::nn::Module with a match report.
#include "detseg/io/state_dict.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/nn/module.h>

#include <sstream>

#include "detseg/core/error.h"
#include "detseg/core/files.h"

namespace detseg {

StateDict read_state_dict(const std::string& path) {
  const std::string bytes = read_file(path);
  std::vector<char> data(bytes.begin(), bytes.end());
  c10::IValue value;
  try {
    value = torch::jit::pickle_load(data);
  } catch (const std::exception& e) {
    throw Error(str(path, ": cannot read a torch.save state dict (", e.what(),
                    "). HINT: save a plain dict: torch.save(dict(model.state_dict()), path)"));
  }
  DETSEG_CHECK(value.isGenericDict(), path, ": expected a dict of tensors, got ",
               value.tagKind());
  StateDict out;
  for (const auto& item : value.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor()) continue;
    out[item.key().toStringRef()] = item.value().toTensor();
  }
  return out;
}

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
std::string join_first(const std::vector<std::string>& names, size_t n) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < n; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > n) s += ", ...";
  return s;
}
}  // namespace

std::string StateDictReport::summary() const {
  std::ostringstream os;
  os << loaded.size() << " loaded, " << missing.size() << " missing, " << unexpected.size()
     << " unexpected, " << shape_mismatch.size() << " shape mismatches";
  if (!missing.empty()) os << "; missing: " << join_first(missing, 5);
  if (!unexpected.empty()) os << "; unexpected: " << join_first(unexpected, 5);
  if (!shape_mismatch.empty()) os << "; shape: " << join_first(shape_mismatch, 5);
  return os.str();
}

StateDictReport load_state_dict(torch::nn::Module& module, const StateDict& dict,
                                const StateDictLoadOptions& options) {
  StateDict renamed;
  for (const auto& [key, value] : dict) {
    std::string k = key;
    if (!options.strip_prefix.empty() && k.rfind(options.strip_prefix, 0) == 0) {
      k = k.substr(options.strip_prefix.size());
    }
    renamed[options.add_prefix + k] = value;
  }
  std::map<std::string, at::Tensor> targets;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) targets[p.key()] = p.value();
  for (const auto& b : module.named_buffers(/*recurse=*/true)) targets[b.key()] = b.value();

  StateDictReport report;
  at::NoGradGuard no_grad;
  for (auto& [name, target] : targets) {
    auto it = renamed.find(name);
    if (it == renamed.end()) {
      report.missing.push_back(name);
      continue;
    }
    const at::Tensor& src = it->second;
    if (src.sizes() != target.sizes()) {
      std::ostringstream os;
      os << name << ": dict " << src.sizes() << " vs module " << target.sizes();
      report.shape_mismatch.push_back(os.str());
      continue;
    }
    target.copy_(src);
    report.loaded.push_back(name);
  }
  for (const auto& [name, value] : renamed) {
    if (targets.count(name)) continue;
    if (ends_with(name, "num_batches_tracked")) continue;
    report.unexpected.push_back(name);
  }
  if (options.strict) {
    DETSEG_CHECK(report.complete(), "load_state_dict (strict): ", report.summary());
  }
  return report;
}

}  // namespace detseg
