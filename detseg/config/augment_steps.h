// Implements: the catalogue of training augmentation steps (train_input.augment) and the parsed form
// of one step. Torch-free: the config reads and checks a list against the catalogue (names and
// defaults are the Object Detection API's preprocessor.proto / preprocessor.py where the step is
// theirs), writes it back in the resolved config and documents it; data/transforms runs it.
//
// A list entry is `- name: {param: value, ...}` (or just `- name`); `probability` is the chance
// the step runs at all (each step declares its default: flips 0.5, random_rgb_to_gray 0.1, the
// rest 1). random_black_patches keeps the reference's meaning of its own `probability` (per
// patch) and always runs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace YAML {
class Node;
class Emitter;
}  // namespace YAML

namespace detseg {

struct PipelineConfig;
struct AugmentStep;

// One parameter of a step, as the catalogue declares it.
struct AugmentParamInfo {
  enum class Kind { kNumber, kInteger, kBool, kNumbers, kText };
  std::string name;
  Kind kind = Kind::kNumber;
  std::vector<double> default_numbers;  // kNumber/kInteger/kBool: one value; kNumbers: the list
  std::string default_text;             // kText
  double min = -1e300, max = 1e300;     // each number's range
  size_t min_items = 1, max_items = 1;  // kNumbers: how many values
  std::vector<std::string> choices;     // kText: allowed values
  std::string doc;
};

struct AugmentStepInfo {
  std::string name;
  std::string family;  // geometric | colour | crop | mix | size: groups the docs
  std::string doc;     // what it does
  // Default of `probability`, the chance the step runs; < 0: the step has no such gate (its own
  // `probability` parameter, if any, means something else).
  double probability = 1.0;
  std::vector<AugmentParamInfo> params;
  // Sizing steps set the image's final training size; a list without one gets the model's own
  // appended (train_input.augment docs).
  bool sizing = false;
  bool needs_boxes = false;  // mixes instances: detectors only
  bool needs_masks = false;  // copies instance masks: instance-mask models only
  // Rules across the step's parameters (min <= max, ...): an error text, or "" when they hold.
  std::function<std::string(const AugmentStep&)> check;
};

// Every step, in documentation order.
const std::vector<AugmentStepInfo>& augment_steps();
const AugmentStepInfo* find_augment_step(const std::string& name);

struct AugmentValue {
  std::vector<double> numbers;
  std::string text;
};

// One configured step: every parameter of its catalogue entry, defaults filled in, in catalogue order.
struct AugmentStep {
  std::string name;
  double probability = 1.0;  // the gate (1 for steps without one)
  std::vector<std::pair<std::string, AugmentValue>> params;
  std::string where;  // "file:line: " (or "--set ...: ") where it was given; "" when made in code

  // The value of a declared parameter (an unknown name is a programming error: Error).
  double number(const std::string& key) const;
  int64_t integer(const std::string& key) const;
  bool flag(const std::string& key) const;
  const std::vector<double>& numbers(const std::string& key) const;
  const std::string& text(const std::string& key) const;
  // Sets a declared parameter (tests and code-built lists).
  AugmentStep& set(const std::string& key, double value);  // `probability` sets the gate
  AugmentStep& set_numbers(const std::string& key, std::vector<double> values);
  AugmentStep& set_text(const std::string& key, const std::string& text);
};

// The step `name` with its defaults (Error for an unknown name).
AugmentStep make_augment_step(const std::string& name);

// train_input.augment: the ordered list, and where it was written ("" when the config left it out
// and it was resolved from the older keys).
struct AugmentList {
  std::vector<AugmentStep> steps;
  std::string where;
  // Set by resolve_augment_lists: the list is final (a config built in code, never resolved, still
  // says it through the older keys).
  bool resolved = false;
};

// Reads one list entry. `where(node)` gives the "file:line: " prefix for an error at that node;
// `path` is the entry's key path ("train_input.augment[2]"). Throws ConfigError naming the step.
AugmentStep parse_augment_step(const YAML::Node& node, const std::string& path,
                               const std::function<std::string(const YAML::Node&)>& where);
// Writes one entry as `name: {param: value, ...}` (the form parse_augment_step reads back).
void emit_augment_step(YAML::Emitter& out, const AugmentStep& step);

// After the config is read: train_input.augment from the older keys when it was left out
// (hflip -> random_horizontal_flip, scale_min/max and the model's resizer -> its sizing step, the
// older keys then reset), the model's sizing step appended when the list has none, and the rules a
// list must keep (no older key beside it, mixing steps only where the model carries what they
// mix, no list on evaluation inputs). ConfigError naming the file and line.
void resolve_augment_lists(PipelineConfig& config);

// docs/config.md's table of steps: name, parameters with defaults, what it does.
std::string augment_steps_markdown();

}  // namespace detseg
