// Implements: the part tables (see registry.h), filled from config/parts.def.
#include "detseg/config/registry.h"

#include <sstream>

#include "detseg/config/config.h"
#include "detseg/core/error.h"

namespace detseg {

// Each line's config check, declared here (defined in model_checks.cpp).
#define DETSEG_MODEL(type, kind, masks, backbones, neck, head, scope, pad, check, builder, description) \
  void check(const PipelineConfig& config, const std::string& at);
#include "detseg/config/parts.def"

namespace {

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::deque<BackboneInfo>& backbone_table() {
  static std::deque<BackboneInfo> table = {
#define DETSEG_BACKBONE(name, family, builder, description) {name, family, description},
#include "detseg/config/parts.def"
  };
  return table;
}

std::deque<ModelTypeInfo>& model_table() {
  static std::deque<ModelTypeInfo> table = {
#define DETSEG_MODEL(type, kind, masks, backbones, neck, head, scope, pad, check, builder, description) \
  {type, kind, masks, words(backbones), scope, pad, check, description, neck, head},
#include "detseg/config/parts.def"
  };
  return table;
}

}  // namespace

const std::deque<ModelTypeInfo>& model_types() { return model_table(); }

const std::deque<BackboneInfo>& backbones() { return backbone_table(); }

const std::vector<EvaluatorInfo>& evaluators() {
  static const std::vector<EvaluatorInfo> table = {
#define DETSEG_EVALUATOR(name, scores, maker, description) {name, std::string(scores) == "label_maps", description},
#include "detseg/config/parts.def"
  };
  return table;
}

const std::vector<BoxLossInfo>& box_losses() {
  static const std::vector<BoxLossInfo> table = {
#define DETSEG_BOX_LOSS(name, function, default_weight, description) {name, default_weight, description},
#include "detseg/config/parts.def"
  };
  return table;
}

const std::vector<PartInfo>& necks() {
  static const std::vector<PartInfo> table = {
#define DETSEG_NECK(name, builder, description) {name, description},
#include "detseg/config/parts.def"
  };
  return table;
}

const std::vector<PartInfo>& dense_heads() {
  static const std::vector<PartInfo> table = {
#define DETSEG_DENSE_HEAD(name, builder, description) {name, description},
#include "detseg/config/parts.def"
  };
  return table;
}

std::string neck_of(const ModelConfig& model) {
  if (!model.neck.empty()) return model.neck;
  const ModelTypeInfo* type = find_model_type(model.type);
  return type ? type->neck : "";
}

std::string head_of(const ModelConfig& model) {
  if (!model.head.empty()) return model.head;
  const ModelTypeInfo* type = find_model_type(model.type);
  return type ? type->head : "";
}

double box_loss_weight_of(const std::string& box_loss, double configured) {
  if (configured != -1) return configured;
  for (const BoxLossInfo& b : box_losses())
    if (b.name == box_loss) return b.default_weight;
  throw ConfigError("model.box_loss: unknown box loss " + box_loss);
}

const EvaluatorInfo* find_evaluator(const std::string& name) {
  for (const EvaluatorInfo& e : evaluators())
    if (e.name == name) return &e;
  return nullptr;
}

const ModelTypeInfo* find_model_type(const std::string& type) {
  for (const ModelTypeInfo& t : model_types())
    if (t.type == type) return &t;
  return nullptr;
}

const BackboneInfo* find_backbone(const std::string& name) {
  for (const BackboneInfo& b : backbones())
    if (b.name == name) return &b;
  return nullptr;
}

bool model_takes_backbone(const ModelTypeInfo& type, const BackboneInfo& backbone) {
  for (const std::string& family : type.families)
    if (family == "*" || family == backbone.family) return true;
  return false;
}

std::vector<std::string> backbones_for(const ModelTypeInfo& type) {
  std::vector<std::string> out;
  for (const BackboneInfo& b : backbones())
    if (model_takes_backbone(type, b)) out.push_back(b.name);
  return out;
}

void add_backbone_info(BackboneInfo info) {
  DETSEG_CONFIG_CHECK(!info.name.empty() && !info.family.empty(), "backbone registry: a backbone needs a name and a family");
  DETSEG_CONFIG_CHECK(find_backbone(info.name) == nullptr, "backbone registry: ", info.name, " is already registered");
  backbone_table().push_back(std::move(info));
}

void add_model_type_info(ModelTypeInfo info) {
  DETSEG_CONFIG_CHECK(!info.type.empty() && (info.kind == "detector" || info.kind == "segmenter"),
                      "model registry: a model type needs a name and a kind (detector or segmenter)");
  DETSEG_CONFIG_CHECK(find_model_type(info.type) == nullptr, "model registry: ", info.type, " is already registered");
  DETSEG_CONFIG_CHECK(info.pad_multiple >= 0, "model registry: ", info.type, ": pad_multiple must be >= 0");
  DETSEG_CONFIG_CHECK(info.neck.empty() == info.head.empty(), "model registry: ", info.type,
                      ": a neck and a head, or neither");
  model_table().push_back(std::move(info));
}

}  // namespace detseg
