// Implements: the part builders (see registry.h), from config/parts.def.
#include "detseg/models/registry.h"

#include <map>

#include "detseg/core/error.h"

namespace detseg {

// Each line's builder, declared here so that adding a part needs no other edit.
#define DETSEG_MODEL(type, kind, masks, backbones, neck, head, scope, pad, check, builder, description) \
  std::shared_ptr<ModelImpl> builder(const PipelineConfig& config);
#define DETSEG_BACKBONE(name, family, builder, description) \
  std::shared_ptr<BackboneImpl> builder(const std::string& backbone, const BackboneOptions& options);
#define DETSEG_NECK(name, builder, description) std::shared_ptr<NeckImpl> builder(const NeckOptions& options);
#define DETSEG_DENSE_HEAD(name, builder, description) \
  std::shared_ptr<DenseHeadImpl> builder(const DenseHeadOptions& options);
#include "detseg/config/parts.def"

namespace {

std::map<std::string, BackboneBuilder>& backbone_builders() {
  static std::map<std::string, BackboneBuilder> table = {
#define DETSEG_BACKBONE(name, family, builder, description) {name, builder},
#include "detseg/config/parts.def"
  };
  return table;
}

std::map<std::string, ModelBuilder>& model_builders() {
  static std::map<std::string, ModelBuilder> table = {
#define DETSEG_MODEL(type, kind, masks, backbones, neck, head, scope, pad, check, builder, description) {type, builder},
#include "detseg/config/parts.def"
  };
  return table;
}

// The lookup every part table shares: the named builder, or a config error that names the key.
template <typename Table>
const typename Table::mapped_type& find_builder(const Table& table, const std::string& name, const char* unknown) {
  auto it = table.find(name);
  DETSEG_CONFIG_CHECK(it != table.end(), unknown, name);
  return it->second;
}

}  // namespace

std::shared_ptr<NeckImpl> build_neck(const std::string& name, const NeckOptions& options) {
  static const std::map<std::string, std::shared_ptr<NeckImpl> (*)(const NeckOptions&)> table = {
#define DETSEG_NECK(name, builder, description) {name, builder},
#include "detseg/config/parts.def"
  };
  return find_builder(table, name, "model.neck: no neck named ")(options);
}

std::shared_ptr<DenseHeadImpl> build_dense_head(const std::string& name, const DenseHeadOptions& options) {
  static const std::map<std::string, std::shared_ptr<DenseHeadImpl> (*)(const DenseHeadOptions&)> table = {
#define DETSEG_DENSE_HEAD(name, builder, description) {name, builder},
#include "detseg/config/parts.def"
  };
  return find_builder(table, name, "model.head: no head named ")(options);
}

std::shared_ptr<BackboneImpl> build_backbone(const std::string& name, const BackboneOptions& options) {
  return find_builder(backbone_builders(), name, "model.backbone: no backbone named ")(name, options);
}

void register_backbone(BackboneInfo info, BackboneBuilder build) {
  DETSEG_CONFIG_CHECK(build != nullptr, "backbone registry: ", info.name, " has no builder");
  const std::string name = info.name;
  add_backbone_info(std::move(info));
  backbone_builders()[name] = std::move(build);
}

const ModelBuilder& model_builder(const std::string& type) {
  return find_builder(model_builders(), type, "model.type: unknown meta-architecture ");
}

void register_model(ModelTypeInfo info, ModelBuilder build) {
  DETSEG_CONFIG_CHECK(build != nullptr, "model registry: ", info.type, " has no builder");
  const std::string type = info.type;
  add_model_type_info(std::move(info));
  model_builders()[type] = std::move(build);
}

}  // namespace detseg
