// Implements: the builders behind the part tables (config/registry.h): model.type -> the model,
// model.backbone -> the backbone network, model.neck / model.head -> a dense detector's parts, one
// entry per config/parts.def line (the table is in registry.cpp, nowhere else); and register_model
// / register_backbone, which add an application's own model types and backbones to both tables at
// run time.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "detseg/config/config.h"
#include "detseg/config/registry.h"
#include "detseg/models/backbones/backbone.h"
#include "detseg/models/heads/dense_head.h"
#include "detseg/models/necks/neck.h"
#include "detseg/models/model.h"

namespace detseg {

// What a model asks of its backbone.
struct BackboneOptions {
  int64_t output_stride = 32;  // 8, 16 or 32: the stages past it dilate instead of striding
  bool frozen_bn = false;
  bool low_level = false;  // also return the stride-4 features, first (DeepLab's decoder)
};

// A backbone's maker: its registered name (one maker may serve several, as resnet18..101) and the
// options -> the network, returning {stride 4 (with low_level), output_stride} feature maps.
using BackboneBuilder = std::function<std::shared_ptr<BackboneImpl>(const std::string& name, const BackboneOptions&)>;

std::shared_ptr<BackboneImpl> build_backbone(const std::string& name, const BackboneOptions& options);

// Adds a backbone (info: name, family, description) with its maker: configs may name it from then
// on, for every model type that takes any backbone ("*": DeepLab).
void register_backbone(BackboneInfo info, BackboneBuilder build);

// model.neck's and model.head's parts (config/parts.def's DETSEG_NECK and DETSEG_DENSE_HEAD).
std::shared_ptr<NeckImpl> build_neck(const std::string& name, const NeckOptions& options);
std::shared_ptr<DenseHeadImpl> build_dense_head(const std::string& name, const DenseHeadOptions& options);

// model.type's builder: the model a validated config describes.
using ModelBuilder = std::function<std::shared_ptr<ModelImpl>(const PipelineConfig& config)>;
const ModelBuilder& model_builder(const std::string& type);

// Adds a model type (info: its part-table line, config/registry.h's ModelTypeInfo) with its
// builder: configs may name it from then on; its check, if any, runs when they are parsed.
void register_model(ModelTypeInfo info, ModelBuilder build);

}  // namespace detseg
