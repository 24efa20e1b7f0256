// Implements: EfficientDet's BiFPN over P3-P7: top-down then bottom-up paths with fast normalised
// fusion (relu weights / (sum + eps)), swish, separable conv + BN per node, repeated `repeats` times.
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <map>
#include <vector>

#include "detseg/models/layers/conv_bn_act.h"
#include "detseg/models/layers/separable_conv.h"
#include "detseg/models/necks/neck.h"

namespace detseg {

struct BiFpnOptions {
  BiFpnOptions(std::vector<int64_t> in_channels, int64_t width, int64_t repeats)
      : in_channels_(std::move(in_channels)), width_(width), repeats_(repeats) {}
  TORCH_ARG(std::vector<int64_t>, in_channels);  // backbone C3, C4, C5 channels
  TORCH_ARG(int64_t, width);                     // W_bifpn
  TORCH_ARG(int64_t, repeats);                   // D_bifpn
  TORCH_ARG(double, eps) = 1e-3;                 // BN eps (TF default)
  TORCH_ARG(double, momentum) = 0.01;            // torch convention of TF's 0.99 decay
  TORCH_ARG(double, fusion_eps) = 1e-4;          // fast normalised fusion epsilon
};

// One fusion node: inputs (indices into the cell's growing list of maps) resampled to its level,
// fused with learnt non-negative weights, then swish -> separable conv -> BN.
class BiFpnNodeImpl : public torch::nn::Module {
 public:
  BiFpnNodeImpl(int64_t level, std::vector<int64_t> inputs, const std::vector<int64_t>& channels,
                const BiFpnOptions& options);
  // maps: all maps so far (levels levels[i]); target_size: (H, W) of this node's level.
  at::Tensor forward(const std::vector<at::Tensor>& maps, const std::vector<int64_t>& levels,
                     std::array<int64_t, 2> target_size);

  int64_t level;
  std::vector<int64_t> inputs;
  double fusion_eps;
  at::Tensor weights;                       // [num_inputs], initialised to 1
  std::map<int64_t, ConvBnAct> resample;    // input index -> 1x1 conv + BN where channels differ
  SeparableConv conv{nullptr};
};
TORCH_MODULE(BiFpnNode);

class BiFpnCellImpl : public torch::nn::Module {
 public:
  BiFpnCellImpl(const std::vector<int64_t>& in_channels, const BiFpnOptions& options);
  std::vector<at::Tensor> forward(const std::vector<at::Tensor>& features);  // P3..P7 -> P3..P7

  std::vector<BiFpnNode> nodes;
};
TORCH_MODULE(BiFpnCell);

// Also model.neck "bifpn" (make_bifpn_neck).
class BiFpnImpl : public NeckImpl {
 public:
  explicit BiFpnImpl(const BiFpnOptions& options);
  // features: backbone C3, C4, C5 -> P3..P7 each [N, width, H_l, W_l].
  std::vector<at::Tensor> forward(const std::vector<at::Tensor>& features) override;

  BiFpnOptions options;
  ConvBnAct p6_resample{nullptr};  // C5 -> width channels before pooling to P6
  std::vector<BiFpnCell> cells;
};
TORCH_MODULE(BiFpn);

// Max-pools (3x3, stride 2, pad 1) or nearest-upsamples x from level `from` to `to`, ending at
// target_size exactly.
at::Tensor resample_to_level(const at::Tensor& x, int64_t from, int64_t to,
                             std::array<int64_t, 2> target_size);

}  // namespace detseg
