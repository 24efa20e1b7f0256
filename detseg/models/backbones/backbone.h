// Implements: the backbone interface: images -> ordered feature maps with known strides/channels.
#pragma once

#include <torch/nn/module.h>

#include <string>
#include <vector>

namespace detseg {

// One returned feature map: its name (torchvision's "0", "1", ... or "C3"), channels and stride.
struct FeatureSpec {
  std::string name;
  int64_t channels = 0;
  int64_t stride = 0;
};

// Every backbone returns its feature maps finest first, one per feature_specs() entry.
class BackboneImpl : public torch::nn::Module {
 public:
  // images: [N, 3, H, W] normalised -> maps[i]: [N, specs[i].channels, ~H/stride, ~W/stride]
  virtual std::vector<at::Tensor> forward(const at::Tensor& images) = 0;
  virtual std::vector<FeatureSpec> feature_specs() const = 0;
};

}  // namespace detseg
