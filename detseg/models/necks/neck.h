// Implements: the neck interface of the dense detectors (model.neck): backbone maps C3, C4, C5 ->
// pyramid maps P3..P7 of one width. The necks are config/parts.def's DETSEG_NECK lines; a new one
// is a file that derives from NeckImpl, defines its maker, and adds its line there.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <vector>

namespace detseg {

// What a dense detector asks of its neck. Each neck reads the fields it has a use for.
struct NeckOptions {
  std::vector<int64_t> in_channels;  // the backbone's C3, C4, C5 channels
  int64_t width = 256;               // channels of every output level
  int64_t repeats = 3;               // bifpn: cells (D_bifpn)
  bool p6_from_p5 = true;            // fpn: P6 from P5 (torchvision v1) or from C5 (v2)
  double bn_eps = 1e-3;              // necks with batch norm (bifpn)
  double bn_momentum = 0.01;
};

class NeckImpl : public torch::nn::Module {
 public:
  // features: C3, C4, C5 ([N, in_channels[i], H / 2^(3+i), W / 2^(3+i)]) -> P3..P7, [N, width, H_l, W_l].
  virtual std::vector<at::Tensor> forward(const std::vector<at::Tensor>& features) = 0;
};

}  // namespace detseg
