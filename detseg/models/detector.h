// Implements: the interface every detection meta-architecture offers the engine: named losses for
// a training batch, and detections in original-image pixels for an inference batch.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "detseg/core/error.h"
#include "detseg/data/example.h"
#include "detseg/models/model.h"
#include "detseg/structures/boxes.h"

namespace detseg {

// Batches a detector takes: [B, 3, image_size, image_size] (model.resizer fixed), or with
// size_divisibility > 0 (keep_aspect) any height and width that are multiples of it.
inline void check_detector_input(const at::Tensor& images, int64_t image_size, int64_t size_divisibility,
                                 const char* model) {
  const bool ok = images.dim() == 4 && images.size(1) == 3 &&
                  (size_divisibility > 0 ? images.size(2) % size_divisibility == 0 &&
                                               images.size(3) % size_divisibility == 0
                                         : images.size(2) == image_size && images.size(3) == image_size);
  if (size_divisibility > 0)
    DETSEG_CHECK(ok, model, ": batch images are ", images.sizes(), " but the model expects [B, 3, H, W] with H and W "
                 "multiples of ", size_divisibility);
  DETSEG_CHECK(ok, model, ": batch images are ", images.sizes(), " but the model expects [B, 3, ", image_size, ", ",
               image_size, "]");
}

class DetectorImpl : public ModelImpl {
 public:
  // One Boxes per image: boxes xyxy in the image's original pixels, scores, classes (contiguous
  // labels 0..K-1), sorted by decreasing score.
  virtual std::vector<Boxes> detect(const Batch& batch) = 0;
  // Both from one forward pass (evaluation reports losses next to metrics).
  virtual std::pair<ModelLosses, std::vector<Boxes>> losses_and_detect(const Batch& batch) {
    return {losses(batch), detect(batch)};
  }
  std::pair<ModelLosses, std::vector<ImagePrediction>> losses_and_predict(const Batch& batch) final {
    auto [losses, detections] = losses_and_detect(batch);
    std::vector<ImagePrediction> out(detections.size());
    for (size_t i = 0; i < detections.size(); ++i) out[i].detections = std::move(detections[i]);
    return {std::move(losses), std::move(out)};
  }
};

}  // namespace detseg
