#include "detseg/engine/inputs.h"

#include "detseg/core/error.h"
#include "detseg/core/log.h"
#include "detseg/data/readers/voc.h"

namespace detseg {

std::shared_ptr<DetectionDataset> make_detection_dataset(const InputConfig& input, bool training, bool with_masks) {
  DETSEG_CONFIG_CHECK(!input.annotations.empty(), "input.annotations: required");
  CocoDataset coco;
  DetectionDatasetOptions options;
  if (input.format == "coco") {
    coco = read_coco(input.annotations);
    options.image_dir = input.images;
  } else if (input.format == "voc") {
    VocOptions voc;
    voc.split = input.split;
    coco = read_voc(input.annotations, voc);
    options.image_dir = input.images.empty() ? input.annotations + "/JPEGImages" : input.images;
  } else {
    throw ConfigError("input.format: " + input.format + " is not a detection format (coco, voc)");
  }
  options.invalid_boxes = parse_box_policy(input.box_policy);
  options.skip_empty_images = false;
  options.skip_ignored = training;
  options.with_masks = with_masks;
  auto dataset = std::make_shared<DetectionDataset>(std::move(coco), options);
  const BoxStats& s = dataset->box_stats();
  log_info(input.annotations, ": ", dataset->size(), " images, ", s.kept, " boxes kept of ", s.total,
           " (clipped ", s.clipped, ", dropped outside ", s.dropped_outside, ", degenerate ",
           s.dropped_degenerate, ", filtered ", s.dropped_filtered, ")");
  return dataset;
}

LoaderOptions make_loader_options(const PipelineConfig& config, const InputConfig& input, bool training,
                                  int64_t batch_size, int64_t input_size) {
  LoaderOptions o;
  o.batch_size = batch_size;
  o.num_workers = static_cast<int>(input.num_workers);
  o.prefetch_batches = static_cast<int>(input.prefetch);
  o.shuffle = training;
  o.seed = static_cast<uint64_t>(config.train.seed);
  o.epochs = training ? 0 : 1;
  o.sample_1_of_n = input.sample_1_of_n;
  o.augment.out_h = input_size;
  o.augment.out_w = input_size;
  o.augment.random_flip = training && input.hflip;
  const bool jitter = training && (input.scale_min != 1.0 || input.scale_max != 1.0);
  o.augment.resize = jitter ? AugmentOptions::Resize::kScaleJitter : AugmentOptions::Resize::kKeepAspect;
  o.augment.jitter.min_scale = input.scale_min;
  o.augment.jitter.max_scale = input.scale_max;
  o.collate.size_divisibility = input_size;
  for (int c = 0; c < 3; ++c) {
    o.collate.normalize.mean[c] = static_cast<float>(config.model.pixel_mean[c]);
    o.collate.normalize.std[c] = static_cast<float>(config.model.pixel_std[c]);
  }
  return o;
}

}  // namespace detseg
