// Implements: pictures of what the model sees in training: the training loader's augmented
// examples (before normalisation) drawn in a grid (viz/augment_grid.h). `detseg augment` writes one
// for a config; `detseg train` writes model_dir/train_batch.png at its start.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "detseg/config/config.h"
#include "detseg/data/loader.h"
#include "detseg/engine/inputs.h"

namespace detseg {

// The examples of batches first_batch, first_batch + 1, ... of `loader`, `count` of them.
std::vector<Example> preview_examples(const Loader& loader, int64_t first_batch, int64_t count);

// Writes `path`: `count` examples from batch first_batch on, with the data's class names and the
// model's normalisation mean as padding. Returns how many were drawn.
int64_t write_augment_preview(const std::string& path, const PipelineConfig& config, const InputData& data,
                              const Loader& loader, int64_t first_batch, int64_t count);

// `detseg train`'s model_dir/train_batch.png (16 examples from batch `step`); a failure to draw it is
// logged as a warning, never stops training.
void write_train_batch_picture(const std::string& model_dir, const PipelineConfig& config, const InputData& data,
                               const Loader& loader, int64_t step);

}  // namespace detseg
