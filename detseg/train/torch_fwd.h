// Implements: forward declarations of the torch classes train/ headers mention by reference, so
// those headers stay free of the heavy torch::nn / torch::optim includes.
#pragma once

#include <torch/types.h>

namespace torch {
namespace nn {
class Module;
}
namespace optim {
class Optimizer;
}
}  // namespace torch
