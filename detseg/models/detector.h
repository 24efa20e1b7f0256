// Implements: the interface every detection meta-architecture offers the engine: named losses for
// a training batch, and detections in original-image pixels for an inference batch.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "detseg/data/example.h"
#include "detseg/models/model.h"
#include "detseg/structures/boxes.h"

namespace detseg {

class DetectorImpl : public ModelImpl {
 public:
  // One Boxes per image: boxes xyxy in the image's original pixels, scores, classes (contiguous
  // labels 0..K-1), sorted by decreasing score.
  virtual std::vector<Boxes> detect(const Batch& batch) = 0;
  // Both from one forward pass (evaluation reports losses next to metrics).
  virtual std::pair<ModelLosses, std::vector<Boxes>> losses_and_detect(const Batch& batch) {
    return {losses(batch), detect(batch)};
  }
};

}  // namespace detseg
