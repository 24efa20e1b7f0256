// Implements: the tables of the parts a config can name, meta-architectures (model.type),
// backbones (model.backbone), dense-detector necks and heads (model.neck, model.head), evaluators
// (eval.metric) and box losses (model.box_loss), as data:
// names, what each model takes, descriptions. Config validation, `detseg info --config-keys` and
// docs/config.md read them; models/registry.h pairs each entry with its builder. The built-in
// entries are config/parts.def's lines; an application linking detseg adds its own models and
// backbones with models/registry.h's register_model and register_backbone. Torch-free.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace detseg {

struct ModelConfig;
struct PipelineConfig;

// The config rules one model type adds (after the shared ones): throws ConfigError, `at` is the
// config's location prefix.
using ModelConfigCheck = std::function<void(const PipelineConfig& config, const std::string& at)>;

// One DETSEG_MODEL line of config/parts.def (its header explains each field).
struct ModelTypeInfo {
  std::string type;
  std::string kind;                   // detector | segmenter
  bool instance_masks = false;
  std::vector<std::string> families;  // backbone families it takes; {"*"} any; {} it picks its own
  std::string backbone_scope;         // e.g. "backbone.body.": where model.pretrained loads
  int64_t pad_multiple = 32;          // keep-aspect batch padding; 0: 2^model.max_level
  ModelConfigCheck check;             // may be empty
  std::string description;
  // Its own DETSEG_NECK and DETSEG_DENSE_HEAD (model.neck and model.head replace them); both empty
  // when it has fixed ones.
  std::string neck, head;
};

struct BackboneInfo {
  std::string name;
  std::string family;
  std::string description;
};

// Built-in, then those added (deques: what find_* returns stays valid when a part is added).
// One DETSEG_EVALUATOR line: an eval.metric name and what it scores.
struct EvaluatorInfo {
  std::string name;
  bool label_maps = false;  // scores segmenters' label maps (else detectors' detections)
  std::string description;
};

// One DETSEG_NECK or DETSEG_DENSE_HEAD line.
struct PartInfo {
  std::string name;
  std::string description;
};

// One DETSEG_BOX_LOSS line: a model.box_loss name and the weight model.box_loss_weight -1 means.
struct BoxLossInfo {
  std::string name;
  double default_weight = 1.0;
  std::string description;
};

const std::deque<ModelTypeInfo>& model_types();
const std::vector<BoxLossInfo>& box_losses();
const std::vector<PartInfo>& necks();
const std::vector<PartInfo>& dense_heads();
// model.neck / model.head as built: the configured one, else the model type's own ("" when the
// type has fixed ones).
std::string neck_of(const ModelConfig& model);
std::string head_of(const ModelConfig& model);
// model.box_loss_weight as used: `configured` unless it is -1, then `box_loss`'s default weight.
double box_loss_weight_of(const std::string& box_loss, double configured);
const std::vector<EvaluatorInfo>& evaluators();
const EvaluatorInfo* find_evaluator(const std::string& name);
const std::deque<BackboneInfo>& backbones();
// nullptr when unknown.
const ModelTypeInfo* find_model_type(const std::string& type);
const BackboneInfo* find_backbone(const std::string& name);
// Whether model type `type` takes backbone `backbone` (both known).
bool model_takes_backbone(const ModelTypeInfo& type, const BackboneInfo& backbone);
// The backbone names `type` takes, in table order.
std::vector<std::string> backbones_for(const ModelTypeInfo& type);

// Add a part after the built-in ones (an existing name is a ConfigError). Call before configs
// naming it are parsed; not thread-safe against concurrent parsing.
void add_backbone_info(BackboneInfo info);
void add_model_type_info(ModelTypeInfo info);

}  // namespace detseg
