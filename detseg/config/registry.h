// Implements: the tables of the parts a config can name, meta-architectures (model.type) and
// backbones (model.backbone), as data: names, what each model takes, descriptions. Config
// validation, `detseg info --config-keys` and docs/config.md read them; models/registry.h pairs
// each entry with its builder. The built-in entries are config/parts.def's lines; an application
// linking detseg adds its own backbones with models/registry.h's register_backbone. Torch-free.
#pragma once

#include <string>
#include <vector>

namespace detseg {

struct ModelTypeInfo {
  std::string type;
  std::string kind;                   // detector | segmenter
  std::vector<std::string> families;  // backbone families it takes; {"*"} any; {} it picks its own
  std::string description;
};

struct BackboneInfo {
  std::string name;
  std::string family;
  std::string description;
};

const std::vector<ModelTypeInfo>& model_types();
const std::vector<BackboneInfo>& backbones();  // built-in, then those added
// nullptr when unknown.
const ModelTypeInfo* find_model_type(const std::string& type);
const BackboneInfo* find_backbone(const std::string& name);
// Whether model type `type` takes backbone `backbone` (both known).
bool model_takes_backbone(const ModelTypeInfo& type, const BackboneInfo& backbone);
// The backbone names `type` takes, in table order.
std::vector<std::string> backbones_for(const ModelTypeInfo& type);

// Adds a backbone after the built-in ones (an existing name is a ConfigError). Call before configs
// naming it are parsed; not thread-safe against concurrent parsing.
void add_backbone_info(BackboneInfo info);

}  // namespace detseg
