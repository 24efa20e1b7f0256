// Implements: what the engine needs of any model, detector or segmenter: named losses for a
// training batch, the input size its loader must produce, and the training step (for losses whose
// behaviour ramps with it, such as DeepLab's hard pixel mining).
#pragma once

#include <torch/nn/module.h>

#include <functional>
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

  // `detseg export`: the network alone, from the normalised, padded batch images to its raw outputs
  // (named by network_output_names). That is the graph TorchScript and ONNX hold; anchors, decoding,
  // NMS and resizing back stay in C++ around it. Models whose network has data-dependent steps
  // inside (Faster R-CNN's proposal NMS between its stages) name no outputs: not exportable.
  using NetworkFunction = std::function<std::vector<at::Tensor>(const at::Tensor& images)>;
  virtual std::vector<std::string> network_output_names() const { return {}; }
  virtual std::vector<at::Tensor> network_outputs(const at::Tensor& /*images*/) { return {}; }
  // Fixed tensors of a height x width input that decoding the outputs needs (dense detectors: the
  // anchors); an export appends them to the graph's outputs so other runtimes can decode.
  virtual std::vector<std::pair<std::string, at::Tensor>> network_constants(int64_t /*height*/, int64_t /*width*/,
                                                                            const at::Device& /*device*/) const {
    return {};
  }
  // Runs `network` (an exported module) in place of this model's own layers from now on.
  virtual void use_network(NetworkFunction /*network*/) {}

 private:
  int64_t step_ = 0;
};

}  // namespace detseg
