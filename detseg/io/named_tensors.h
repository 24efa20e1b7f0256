// Implements: the ordered name -> tensor list shared by checkpoints, EMA, .pth import and
// fine-tuning (order matters: it is the module's registration order).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace detseg {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

}  // namespace detseg
