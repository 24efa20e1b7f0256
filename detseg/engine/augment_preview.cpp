// Implements: the augmented-examples pictures of `detseg augment` and `detseg train`.
#include "detseg/engine/augment_preview.h"

#include <cmath>

#include "detseg/core/error.h"
#include "detseg/core/log.h"
#include "detseg/viz/augment_grid.h"

namespace detseg {

std::vector<Example> preview_examples(const Loader& loader, int64_t first_batch, int64_t count) {
  std::vector<Example> out;
  for (int64_t batch = first_batch; static_cast<int64_t>(out.size()) < count; ++batch) {
    std::vector<Example> examples = loader.examples(batch);
    for (Example& ex : examples) {
      if (static_cast<int64_t>(out.size()) == count) break;
      out.push_back(std::move(ex));
    }
  }
  return out;
}

int64_t write_augment_preview(const std::string& path, const PipelineConfig& config, const InputData& data,
                              const Loader& loader, int64_t first_batch, int64_t count) {
  const std::vector<Example> examples = preview_examples(loader, first_batch, count);
  ExampleGridOptions options;
  options.class_names = data.class_names;
  for (int c = 0; c < 3; ++c)
    options.pad_rgb[static_cast<size_t>(c)] =
        static_cast<uint8_t>(std::lround(config.model.pixel_mean[static_cast<size_t>(c)] * 255.0));
  write_example_grid(path, examples, options);
  return static_cast<int64_t>(examples.size());
}

void write_train_batch_picture(const std::string& model_dir, const PipelineConfig& config, const InputData& data,
                               const Loader& loader, int64_t step) {
  const std::string path = model_dir + "/train_batch.png";
  try {
    const int64_t n = write_augment_preview(path, config, data, loader, step, 16);
    log_info("wrote ", path, ": ", n, " training images as augmented from step ", step);
  } catch (const std::exception& e) {
    log_warn("could not draw ", path, ": ", e.what());
  }
}

}  // namespace detseg
