// Implements: the interface every detection meta-architecture offers the engine: named losses for
// a training batch, and detections in original-image pixels for an inference batch.
#pragma once

#include <torch/nn/module.h>

#include <memory>
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

class DetectorImpl : public torch::nn::Module {
 public:
  virtual ModelLosses losses(const Batch& batch) = 0;
  // One Boxes per image: boxes xyxy in the image's original pixels, scores, classes (contiguous
  // labels 0..K-1), sorted by decreasing score.
  virtual std::vector<Boxes> detect(const Batch& batch) = 0;
  // Both from one forward pass (evaluation reports losses next to metrics).
  virtual std::pair<ModelLosses, std::vector<Boxes>> losses_and_detect(const Batch& batch) {
    return {losses(batch), detect(batch)};
  }
  // The square input size the loader must produce (images are resized and padded to it).
  virtual int64_t input_size() const = 0;
};

}  // namespace detseg
