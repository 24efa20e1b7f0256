// Implements: `detseg augment`: train_input's images through the training loader's augmentation
// (train_input.augment, the batches and seeds of the given step), drawn in a grid into
// OUT/augment.png.
#include "cli/commands.h"
#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/log.h"
#include "detseg/engine/augment_preview.h"
#include "detseg/engine/inputs.h"
#include "detseg/models/build.h"

namespace detseg::cli {

int run_augment(const AugmentArgs& args) {
  const PipelineConfig config = load_config(args.config, args.overrides);
  make_directories(args.out_dir);
  const std::string path = args.out_dir + "/augment.png";
  std::vector<CommandInput> inputs;
  for (const std::string& file : config.files) inputs.push_back({file, "the config"});
  inputs.push_back({config.train_input.annotations, "train_input.annotations"});
  check_output_is_not_an_input(path, "--out", inputs);
  const InputData data = make_input_data(config, config.train_input, /*training=*/true);
  // The model's input size without building the model: what ModelImpl::input_size() returns.
  const int64_t input_size = is_segmentation_model(config) ? config.model.deeplab.crop_size : config.model.image_size;
  LoaderOptions options = make_loader_options(config, config.train_input, /*training=*/true,
                                              config.train.batch_size, input_size);
  options.num_workers = 0;  // examples() builds on this thread
  Loader loader(data.size, data.load, options);
  const int64_t drawn = write_augment_preview(path, config, data, loader, args.step, args.count);
  std::string steps;
  for (const AugmentStep& s : config.train_input.augment.steps) steps += (steps.empty() ? "" : ", ") + s.name;
  print_output(str("wrote ", path, ": ", drawn, " training images as augmented at step ", args.step, " (", steps,
                   ")\n"));
  return 0;
}

}  // namespace detseg::cli
