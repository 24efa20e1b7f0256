// Implements: what the engine needs of any model, detector or segmenter: named losses for a
// training batch, the input size its loader must produce, and the training step (for losses whose
// behaviour ramps with it, such as DeepLab's hard pixel mining).
#pragma once

#include <torch/nn/module.h>

#include <string>
#include <utility>
#include <vector>

#include "detseg/data/example.h"

namespace detseg {

// What a training forward pass returns. The loop backpropagates `total` (plus L2) and logs every
// entry of `parts`, in order; statistics such as the number of positives travel here too.
struct ModelLosses {
  at::Tensor total;  // scalar, differentiable
  std::vector<std::pair<std::string, at::Tensor>> parts;
};

class ModelImpl : public torch::nn::Module {
 public:
  virtual ModelLosses losses(const Batch& batch) = 0;
  // Detectors: the square input size (images are resized and padded to it). Segmenters: the
  // square training crop size.
  virtual int64_t input_size() const = 0;
  // The global step of the batch handed to the next losses() call (the train loop sets it).
  virtual void set_step(int64_t step) { step_ = step; }
  int64_t step() const { return step_; }

 private:
  int64_t step_ = 0;
};

}  // namespace detseg
