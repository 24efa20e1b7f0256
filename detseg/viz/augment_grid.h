// Implements: a picture of augmented training examples as the model receives them (Ultralytics'
// train_batch picture): each example on its padded canvas, label map and instance masks tinted,
// boxes with class names (crowd regions dashed), in a grid of equal cells. `detseg augment` and
// the start of `detseg train` write it.
#pragma once

#include <opencv2/core.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "detseg/data/example.h"

namespace detseg {

struct ExampleGridOptions {
  int cell = 320;    // each example scaled to fit a cell x cell square
  int columns = 0;   // 0: ceil(sqrt(count))
  std::vector<std::string> class_names;           // label -> name (empty: the label number)
  std::array<uint8_t, 3> pad_rgb = {124, 116, 104};  // the collate's padding: the normalisation mean
};

// Examples with uint8 images [3, H, W] (before normalisation). A BGR picture.
cv::Mat render_example_grid(const std::vector<Example>& examples, const ExampleGridOptions& options = {});

// render_example_grid written as a PNG (atomically).
void write_example_grid(const std::string& path, const std::vector<Example>& examples,
                        const ExampleGridOptions& options = {});

}  // namespace detseg
