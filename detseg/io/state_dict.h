// Implements: loading a PyTorch state dict (torch.save of a plain dict name -> tensor) into a
// torch::nn::Module by parameter/buffer name, with a report of what matched.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}

namespace detseg {

using StateDict = std::map<std::string, at::Tensor>;

// Reads a file written by torch.save(dict(model.state_dict()), path) (a plain dict: Debian's
// LibTorch 1.13 pickle_load cannot rebuild an OrderedDict). Non-tensor values are skipped.
StateDict read_state_dict(const std::string& path);

struct StateDictReport {
  std::vector<std::string> loaded;          // copied
  std::vector<std::string> missing;         // in the module, not in the dict
  std::vector<std::string> unexpected;      // in the dict, not in the module
  std::vector<std::string> shape_mismatch;  // "name: dict [..] vs module [..]", not copied
  bool complete() const { return missing.empty() && unexpected.empty() && shape_mismatch.empty(); }
  std::string summary() const;  // one line of counts + the first few names of each kind
};

struct StateDictLoadOptions {
  std::string strip_prefix;  // removed from dict keys that start with it (e.g. "module.")
  std::string add_prefix;    // then prepended (e.g. "backbone.body." for a classifier's dict)
  bool strict = false;       // throw detseg::Error unless the report is complete
};

// Copies matching tensors (by name, same shape) into the module's parameters and buffers.
// Keys ending in num_batches_tracked that the module lacks are ignored, as torchvision's
// FrozenBatchNorm2d does.
StateDictReport load_state_dict(torch::nn::Module& module, const StateDict& dict,
                                const StateDictLoadOptions& options = {});

}  // namespace detseg
