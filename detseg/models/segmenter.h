// Implements: the interface every semantic-segmentation meta-architecture offers the engine: named
// losses for a training batch (ModelImpl), and one label map per image, at the image's original
// resolution, for an inference batch.
#pragma once

#include <utility>
#include <vector>

#include "detseg/models/model.h"

namespace detseg {

class SegmenterImpl : public ModelImpl {
 public:
  // One [H0, W0] int64 map of class ids 0..K-1 per image, H0 x W0 = Batch::original_sizes[b].
  virtual std::vector<at::Tensor> segment(const Batch& batch) = 0;
  // Both from one pass where the model can share it (evaluation reports losses next to metrics).
  virtual std::pair<ModelLosses, std::vector<at::Tensor>> losses_and_segment(const Batch& batch) {
    return {losses(batch), segment(batch)};
  }
  std::pair<ModelLosses, std::vector<ImagePrediction>> losses_and_predict(const Batch& batch) final {
    auto [losses, maps] = losses_and_segment(batch);
    std::vector<ImagePrediction> out(maps.size());
    for (size_t i = 0; i < maps.size(); ++i) out[i].label_map = std::move(maps[i]);
    return {std::move(losses), std::move(out)};
  }
  virtual int64_t num_classes() const = 0;
};

}  // namespace detseg
