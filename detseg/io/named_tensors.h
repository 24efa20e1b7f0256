// Implements: the ordered name -> tensor list shared by checkpoints, EMA, .pth import and
// fine-tuning (order matters: it is the module's registration order).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace detseg {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

}  // namespace detseg
