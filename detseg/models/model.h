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
#include "detseg/structures/boxes.h"

namespace detseg {

// What a training forward pass returns. The loop backpropagates `total` (plus L2) and logs every
// entry of `parts`, in order; statistics such as the number of positives travel here too.
struct ModelLosses {
  at::Tensor total;  // scalar, differentiable
  std::vector<std::pair<std::string, at::Tensor>> parts;
};

// One image's prediction for evaluation, in its original pixels: a detector's detections (boxes,
// scores, classes, masks) or a segmenter's label map (int64 [H, W]).
struct ImagePrediction {
  Boxes detections;
  at::Tensor label_map;
};

class ModelImpl : public torch::nn::Module {
 public:
  virtual ModelLosses losses(const Batch& batch) = 0;
  // Evaluation: the batch's losses and each image's prediction, from one forward pass.
  virtual std::pair<ModelLosses, std::vector<ImagePrediction>> losses_and_predict(const Batch& batch) = 0;
  // Detectors: the square input size (images are resized and padded to it). Segmenters: the
  // square training crop size.
  virtual int64_t input_size() const = 0;
  // The global step of the batch handed to the next losses() call (the train loop sets it).
  virtual void set_step(int64_t step) { step_ = step; }
  int64_t step() const { return step_; }

  // `detseg export`: the network alone, as graphs of tensors that TorchScript and ONNX hold;
  // anchors, decoding, NMS, RoI crops and resizing back stay in C++ around them. The first graph,
  // forward, takes the normalised, padded batch images to the raw outputs named by
  // network_output_names. A model with data-dependent steps between its stages (Faster R-CNN's
  // proposal NMS and RoI crops) adds one graph per later stage (network_graphs), fed by C++.
  virtual std::vector<std::string> network_output_names() const { return {}; }
  virtual std::vector<at::Tensor> network_outputs(const at::Tensor& /*images*/) { return {}; }
  // Fixed tensors of a height x width input that decoding the outputs needs (the anchors); an
  // export appends them to forward's outputs so other runtimes can decode.
  virtual std::vector<std::pair<std::string, at::Tensor>> network_constants(int64_t /*height*/, int64_t /*width*/,
                                                                            const at::Device& /*device*/) const {
    return {};
  }
  // The graphs after forward: a TorchScript method each (ONNX: a file each). Their first dimension
  // (regions) is free.
  struct NetworkGraph {
    std::string name;
    std::vector<std::string> input_names, output_names;
  };
  virtual std::vector<NetworkGraph> network_graphs() const { return {}; }
  // Runs graph `name` with this model's own layers.
  virtual std::vector<at::Tensor> run_network_graph(const std::string& /*name*/, const std::vector<at::Tensor>& /*inputs*/) {
    return {};
  }
  // Inputs to trace graph `name` with, cut from forward's outputs on an example image.
  virtual std::vector<at::Tensor> network_graph_example(const std::string& /*name*/,
                                                        const std::vector<at::Tensor>& /*forward_outputs*/) {
    return {};
  }
  // Runs `network` (an exported module: graph name, inputs -> outputs; "forward" takes the images)
  // in place of this model's own layers from now on.
  using NetworkFunction =
      std::function<std::vector<at::Tensor>(const std::string& graph, const std::vector<at::Tensor>& inputs)>;
  virtual void use_network(NetworkFunction /*network*/) {}

  // The name torchvision's model gives this model's parameter or buffer `name` (safetensors
  // export). detseg's names are torchvision's unless a model says otherwise.
  virtual std::string torchvision_name(const std::string& name) const { return name; }

  // The classes this model's outputs stand for, in label order: its training data's names, kept
  // in every checkpoint and export. Data is matched to them by name wherever a model meets data
  // (evaluation, resume, fine-tuning). Empty: not known (a checkpoint written without them).
  std::vector<std::string> class_names;

 private:
  int64_t step_ = 0;
};

}  // namespace detseg
