// Implements: tiny modules with known parameter names and values shared by the train tests.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>

namespace detseg::testing {

// Parameters, in order: fc1.weight [2,2], fc1.bias [2], bn.weight [2], bn.bias [2],
// head.weight [1,2], head.bias [1]; buffers bn.running_mean/var, bn.num_batches_tracked.
struct TinyNetImpl : torch::nn::Module {
  TinyNetImpl()
      : fc1(register_module("fc1", torch::nn::Linear(2, 2))),
        bn(register_module("bn", torch::nn::BatchNorm1d(2))),
        head(register_module("head", torch::nn::Linear(2, 1))) {}
  torch::Tensor forward(const torch::Tensor& x) { return head(torch::relu(bn(fc1(x)))); }
  torch::nn::Linear fc1;
  torch::nn::BatchNorm1d bn;
  torch::nn::Linear head;
};
TORCH_MODULE(TinyNet);

// Sets every parameter to a fixed pattern so tests do not depend on initialisation.
inline void fill_tiny(TinyNetImpl& net) {
  torch::NoGradGuard g;
  net.fc1->weight.copy_(torch::tensor({{1.f, 2.f}, {3.f, 4.f}}));
  net.fc1->bias.copy_(torch::tensor({0.5f, -0.5f}));
  net.bn->weight.copy_(torch::tensor({1.f, 1.f}));
  net.bn->bias.copy_(torch::tensor({0.f, 0.f}));
  net.head->weight.copy_(torch::tensor({{1.f, -1.f}}));
  net.head->bias.copy_(torch::tensor({0.25f}));
}

}  // namespace detseg::testing
