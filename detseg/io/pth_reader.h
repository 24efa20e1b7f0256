// Implements: a reader of torch.save files (the zip container since PyTorch 1.6, with a pickle of
// the object and one entry per storage), for state dicts saved as OrderedDicts and checkpoints
// that nest them, which LibTorch 1.13's torch::pickle_load cannot read. Only the pickle subset
// torch.save emits is supported; unknown classes become opaque objects, never code.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "detseg/io/named_tensors.h"

namespace detseg {

struct PickleValue;
using PickleRef = std::shared_ptr<PickleValue>;

struct PickleValue {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kBytes,
    kTuple,
    kList,
    kDict,
    kTensor,
    kStorage,
    kGlobal,
    kObject
  };
  Kind kind = Kind::kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;                 // string, bytes, "module.name" of a global/object
  std::vector<PickleRef> items;  // tuple, list, object constructor arguments
  std::vector<std::pair<PickleRef, PickleRef>> dict;  // insertion order kept
  at::Tensor tensor;                                  // tensor, or the flat storage

  // The value under a string key of a dict, or nullptr.
  const PickleValue* find(const std::string& key) const;
};

// Parses a torch.save file into its root object. Throws Error naming the file for a truncated or
// foreign file, compressed entries, the legacy (pre-1.6) format, or pickle outside the subset.
PickleRef read_pth(const std::string& path);
PickleRef parse_pth_bytes(const std::string& bytes, const std::string& what);

// Every tensor in nested string-keyed dicts, named by joining the keys with '.', depth first in
// insertion order: {"model": {"fc.weight": t}, "epoch": 3} -> {"model.fc.weight": t}.
NamedTensors flatten_tensors(const PickleValue& root);

// The state dict in a .pth file. With `key` empty: the root dict, or when the root holds no
// tensors directly, the dict under "state_dict", "model" or "model_state_dict". Otherwise the
// dict under that '.'-separated key path. Throws Error when no tensors are found.
NamedTensors read_pth_state_dict(const std::string& path, const std::string& key = "");

}  // namespace detseg
