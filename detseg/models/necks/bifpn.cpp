// Implements: EfficientDet's BiFPN with fast normalised fusion.
#include "detseg/models/necks/bifpn.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/container/modulelist.h>

#include "detseg/core/error.h"

namespace detseg {

namespace {
// The BiFPN graph over P3..P7 (maps 0..4): top-down nodes P6'..P3 (P3 is also an output), then
// bottom-up outputs P4..P7. Each entry: level and the indices of the maps it fuses.
struct NodeSpec {
  int64_t level;
  std::vector<int64_t> inputs;
};
const std::vector<NodeSpec>& bifpn_graph() {
  static const std::vector<NodeSpec> graph = {
      {6, {3, 4}},    {5, {2, 5}},    {4, {1, 6}},     {3, {0, 7}},
      {4, {1, 7, 8}}, {5, {2, 6, 9}}, {6, {3, 5, 10}}, {7, {4, 11}}};
  return graph;
}
constexpr int64_t kMinLevel = 3, kNumLevels = 5;
}  // namespace

at::Tensor resample_to_level(const at::Tensor& x, int64_t from, int64_t to,
                             std::array<int64_t, 2> target_size) {
  at::Tensor y = x;
  for (int64_t l = from; l < to; ++l) y = at::max_pool2d(y, {3, 3}, {2, 2}, {1, 1}, {1, 1});
  if (from > to || y.size(2) != target_size[0] || y.size(3) != target_size[1]) {
    y = at::upsample_nearest2d(y, {target_size[0], target_size[1]});
  }
  return y;
}

BiFpnNodeImpl::BiFpnNodeImpl(int64_t level_, std::vector<int64_t> inputs_,
                             const std::vector<int64_t>& channels, const BiFpnOptions& options)
    : level(level_), inputs(std::move(inputs_)), fusion_eps(options.fusion_eps()) {
  weights = register_parameter("weights", at::ones({static_cast<int64_t>(inputs.size())}));
  for (int64_t idx : inputs) {
    if (channels[idx] == options.width()) continue;
    auto conv = ConvBnAct(ConvBnActOptions(channels[idx], options.width(), 1)
                              .eps(options.eps())
                              .momentum(options.momentum())
                              .activation(Activation::kNone));
    resample.emplace(idx, register_module("resample_" + std::to_string(idx), conv));
  }
  conv = register_module("conv", SeparableConv(SeparableConvOptions(options.width(), options.width())
                                                   .eps(options.eps())
                                                   .momentum(options.momentum())));
}

at::Tensor BiFpnNodeImpl::forward(const std::vector<at::Tensor>& maps,
                                  const std::vector<int64_t>& levels,
                                  std::array<int64_t, 2> target_size) {
  const at::Tensor w = at::relu(weights);
  const at::Tensor norm = w.sum() + fusion_eps;
  at::Tensor fused;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t idx = inputs[i];
    at::Tensor x = maps[idx];
    auto it = resample.find(idx);
    if (it != resample.end()) x = it->second->forward(x);
    x = resample_to_level(x, levels[idx], level, target_size) * (w[i] / norm);
    fused = fused.defined() ? fused.add_(x) : x;
  }
  return conv->forward(at::silu_(fused));
}

BiFpnCellImpl::BiFpnCellImpl(const std::vector<int64_t>& in_channels, const BiFpnOptions& options) {
  std::vector<int64_t> channels = in_channels;  // grows by one width per node
  torch::nn::ModuleList list;
  for (const NodeSpec& spec : bifpn_graph()) {
    nodes.emplace_back(spec.level, spec.inputs, channels, options);
    list->push_back(nodes.back());
    channels.push_back(options.width());
  }
  register_module("nodes", list);
}

std::vector<at::Tensor> BiFpnCellImpl::forward(const std::vector<at::Tensor>& features) {
  TORCH_CHECK(static_cast<int64_t>(features.size()) == kNumLevels, "BiFPN cell: expected ",
              kNumLevels, " maps (P3..P7), got ", features.size());
  std::vector<at::Tensor> maps = features;
  std::vector<int64_t> levels;
  for (int64_t l = 0; l < kNumLevels; ++l) levels.push_back(kMinLevel + l);
  for (auto& node : nodes) {
    const at::Tensor& ref = features[node->level - kMinLevel];
    maps.push_back(node->forward(maps, levels, {ref.size(2), ref.size(3)}));
    levels.push_back(node->level);
  }
  // The last kNumLevels nodes are P3..P7 in order.
  return std::vector<at::Tensor>(maps.end() - kNumLevels, maps.end());
}

BiFpnImpl::BiFpnImpl(const BiFpnOptions& options_) : options(options_) {
  DETSEG_CONFIG_CHECK(options.in_channels().size() == 3, "BiFPN: expects 3 backbone maps (C3..C5), got ",
                      options.in_channels().size());
  DETSEG_CONFIG_CHECK(options.repeats() >= 1 && options.width() >= 1,
                      "BiFPN: width and repeats must be >= 1, got ", options.width(), ", ",
                      options.repeats());
  const int64_t w = options.width();
  p6_resample = register_module("p6_resample", ConvBnAct(ConvBnActOptions(options.in_channels().back(), w, 1)
                                                             .eps(options.eps())
                                                             .momentum(options.momentum())
                                                             .activation(Activation::kNone)));
  torch::nn::ModuleList list;
  for (int64_t r = 0; r < options.repeats(); ++r) {
    std::vector<int64_t> in = r == 0 ? options.in_channels() : std::vector<int64_t>{w, w, w};
    in.push_back(w);  // P6
    in.push_back(w);  // P7
    cells.emplace_back(in, options);
    list->push_back(cells.back());
  }
  register_module("cells", list);
}

std::vector<at::Tensor> BiFpnImpl::forward(const std::vector<at::Tensor>& features) {
  TORCH_CHECK(features.size() == 3, "BiFPN: expected C3, C4, C5, got ", features.size(), " maps");
  std::vector<at::Tensor> maps = features;
  at::Tensor p6 = at::max_pool2d(p6_resample->forward(features.back()), {3, 3}, {2, 2}, {1, 1}, {1, 1});
  at::Tensor p7 = at::max_pool2d(p6, {3, 3}, {2, 2}, {1, 1}, {1, 1});
  maps.push_back(p6);
  maps.push_back(p7);
  for (auto& cell : cells) maps = cell->forward(maps);
  return maps;
}

std::shared_ptr<NeckImpl> make_bifpn_neck(const NeckOptions& o) {
  return std::make_shared<BiFpnImpl>(
      BiFpnOptions(o.in_channels, o.width, o.repeats).eps(o.bn_eps).momentum(o.bn_momentum));
}

}  // namespace detseg
