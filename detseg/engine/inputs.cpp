#include "detseg/engine/inputs.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "detseg/core/error.h"
#include "detseg/core/log.h"
#include "detseg/data/image_io.h"
#include "detseg/data/readers/label_map.h"
#include "detseg/data/readers/voc.h"
#include "detseg/data/readers/yolo.h"
#include "detseg/models/build.h"

namespace detseg {

namespace {

// COCO and YOLO categories against input.label_map: a category keeps its name when the map lists
// it, takes the map's name for its id otherwise (a COCO file whose names differ from the map's),
// and is refused when neither matches. (VOC's reader takes the map itself: unknown names are
// refused at their XML line.)
void apply_label_map(CocoDataset& coco, const LabelMap& map, const std::string& map_file, bool rename_by_id) {
  std::vector<std::string> names;
  for (const LabelMapEntry& e : map.entries) names.push_back(e.name);
  for (CocoCategory& c : coco.categories) {
    if (map.id_of(c.name) >= 0) continue;
    const std::string renamed = rename_by_id ? map.name_of(c.id) : "";
    if (renamed.empty())
      throw ConfigError(str(coco.source, ": category '", c.name, "' (id ", c.id, ") is not in the label map ", map_file,
                            " ", quoted_names(names)));
    log_info(coco.source, ": category ", c.id, " '", c.name, "' is '", renamed, "' in ", map_file);
    c.name = renamed;
  }
}

// train_input.augment, resolved from the older keys when the config was built in code rather than read.
std::vector<AugmentStep> training_steps(const PipelineConfig& config, const InputConfig& input) {
  if (input.augment.resolved) return input.augment.steps;
  PipelineConfig resolved = config;
  resolved.train_input = input;
  resolved.eval_input = InputConfig{};
  resolved.eval_inputs.clear();
  resolve_augment_lists(resolved);
  return resolved.train_input.augment.steps;
}

// The sizes a step leaves to the model (0) filled in.
void resolve_step_sizes(AugmentStep& s, const PipelineConfig& config, int64_t input_size) {
  const double size = static_cast<double>(input_size);
  for (const char* key : {"size", "output_size", "crop_size"})
    for (const auto& [name, value] : s.params)
      if (name == key && value.numbers.at(0) == 0) s.set(key, size);
  if (s.name == "resize_min_max") {
    if (s.number("min_dimension") == 0) s.set("min_dimension", static_cast<double>(config.model.min_dimension));
    if (s.number("max_dimension") == 0) s.set("max_dimension", static_cast<double>(config.model.max_dimension));
  }
}

// A trailing model sizing step becomes the loader's resize policy: the path (and the random draws)
// those configs took before the list existed.
bool take_sizing_step(const AugmentStep& s, AugmentOptions& a) {
  if (s.name == "resize_to_fit") {
    a.resize = AugmentOptions::Resize::kKeepAspect;
    a.out_h = a.out_w = s.integer("size");
  } else if (s.name == "scale_jitter_crop") {
    a.resize = AugmentOptions::Resize::kScaleJitter;
    a.out_h = a.out_w = s.integer("output_size");
    a.jitter.min_scale = s.number("scale_min");
    a.jitter.max_scale = s.number("scale_max");
  } else if (s.name == "resize_min_max") {
    a.resize = AugmentOptions::Resize::kMinMax;
    a.min_max.min_dimension = s.number("min_dimension");
    a.min_max.max_dimension = s.number("max_dimension");
    a.min_max.min_scale = s.number("scale_min");
    a.min_max.max_scale = s.number("scale_max");
  } else if (s.name == "deeplab_scale_crop_pad") {
    a.resize = AugmentOptions::Resize::kDeepLab;
    a.out_h = a.out_w = s.integer("crop_size");
    a.deeplab.min_scale = s.number("scale_min");
    a.deeplab.max_scale = s.number("scale_max");
    a.deeplab.scale_step = s.number("scale_step");
  } else {
    return false;
  }
  return true;
}

}  // namespace

std::shared_ptr<DetectionDataset> make_detection_dataset(const InputConfig& input, bool training, bool with_masks,
                                                         const std::vector<std::string>& class_order) {
  DETSEG_CONFIG_CHECK(!input.annotations.empty(), "input.annotations: required");
  LabelMap label_map;
  if (!input.label_map.empty()) label_map = read_label_map(input.label_map);
  CocoDataset coco;
  DetectionDatasetOptions options;
  if (input.format == "coco") {
    coco = read_coco(input.annotations);
    options.image_dir = input.images;
  } else if (input.format == "voc") {
    VocOptions voc;
    voc.split = input.split;
    voc.label_map = label_map;
    coco = read_voc(input.annotations, voc);
    options.image_dir = input.images.empty() ? input.annotations + "/JPEGImages" : input.images;
  } else if (input.format == "yolo") {
    YoloOptions yolo;
    yolo.split = !input.split.empty() ? input.split : training ? "train" : "val";
    YoloDataset read = read_yolo(input.annotations, yolo);
    coco = std::move(read.coco);
    options.image_dir = input.images.empty() ? read.image_root : input.images;
  } else {
    throw ConfigError("input.format: " + input.format + " is not a detection format (coco, voc, yolo)");
  }
  if (!label_map.entries.empty() && input.format != "voc")
    apply_label_map(coco, label_map, input.label_map, /*rename_by_id=*/input.format == "coco");
  options.class_order = class_order;
  if (options.class_order.empty())  // the label map orders the classes
    for (const LabelMapEntry& e : label_map.entries) options.class_order.push_back(e.name);
  if (input.max_images > 0 && static_cast<int64_t>(coco.images.size()) > input.max_images) {
    // The first max_images images in file order, with their annotations only.
    coco.images.resize(static_cast<size_t>(input.max_images));
    std::unordered_set<int64_t> kept;
    for (const CocoImage& image : coco.images) kept.insert(image.id);
    coco.annotations.erase(std::remove_if(coco.annotations.begin(), coco.annotations.end(),
                                          [&](const CocoAnnotation& a) { return !kept.count(a.image_id); }),
                           coco.annotations.end());
    coco.index();
  }
  options.invalid_boxes = parse_box_policy(input.box_policy);
  options.bad_images = parse_bad_image_policy(input.bad_images);
  options.skip_empty_images = false;
  options.skip_ignored = training;
  options.with_masks = with_masks;
  auto dataset = std::make_shared<DetectionDataset>(std::move(coco), options);
  const BoxStats& s = dataset->box_stats();
  log_info(input.annotations, ": ", dataset->size(), " images, ", s.kept, " boxes kept of ", s.total,
           " (clipped ", s.clipped, ", dropped outside ", s.dropped_outside, ", degenerate ",
           s.dropped_degenerate, ", filtered ", s.dropped_filtered, ")");
  // A detector trained on no box learns only "nothing here", silently.
  DETSEG_CONFIG_CHECK(!training || !input.require_boxes || s.kept > 0, input.annotations,
                      ": no usable box to train on (", s.total, " annotations: ", s.dropped_outside,
                      " outside their image, ", s.dropped_degenerate, " with zero size, ", s.dropped_filtered,
                      " crowd/difficult); train_input.require_boxes: false trains on background alone");
  return dataset;
}

std::shared_ptr<SegmentationDataset> make_segmentation_dataset(const InputConfig& input, int64_t num_classes) {
  DETSEG_CONFIG_CHECK(input.format == "seg_folder", "input.format: segmentation models read seg_folder inputs, got ",
                      input.format);
  DETSEG_CONFIG_CHECK(!input.images.empty() && !input.annotations.empty(),
                      "input.images (image folder) and input.annotations (label PNG folder) are required for seg_folder");
  SegFolderOptions options;
  options.image_dir = input.images;
  options.label_dir = input.annotations;
  options.num_classes = num_classes;
  for (int64_t v : input.void_values) options.void_values.push_back(static_cast<int>(v));
  SegFolder folder = read_seg_folder(options);
  if (input.max_images > 0 && static_cast<int64_t>(folder.samples.size()) > input.max_images)
    folder.samples.resize(static_cast<size_t>(input.max_images));
  log_info(input.images, ": ", folder.samples.size(), " images with label maps in ", input.annotations);
  return std::make_shared<SegmentationDataset>(std::move(folder), parse_bad_image_policy(input.bad_images));
}

InputData make_input_data(const PipelineConfig& config, const InputConfig& input, bool training,
                          const std::vector<std::string>& model_classes) {
  set_max_image_pixels(config.max_image_pixels);
  InputData data;
  if (is_segmentation_model(config)) {
    auto dataset = make_segmentation_dataset(input, config.model.num_classes);
    data.size = dataset->size();
    data.load = [dataset](int64_t i) { return dataset->get(i); };
    data.num_classes = config.model.num_classes;
    if (!input.label_map.empty()) {
      for (const auto& entry : read_label_map(input.label_map).entries) data.class_names.push_back(entry.name);
      DETSEG_CONFIG_CHECK(static_cast<int64_t>(data.class_names.size()) == data.num_classes, input.label_map,
                          ": ", data.class_names.size(), " class names but model.num_classes is ", data.num_classes);
    } else {
      for (int64_t k = 0; k < data.num_classes; ++k) data.class_names.push_back(std::to_string(k));
    }
    // Label values are the classes here; names only label them. Named classes that disagree with
    // the model's would mislabel every per-class figure.
    DETSEG_CONFIG_CHECK(input.label_map.empty() || model_classes.empty() || model_classes == data.class_names,
                        input.label_map, ": classes ", quoted_names(data.class_names), " differ from the model's ",
                        quoted_names(model_classes), " (a segmentation label value is a class index)");
    data.segmentation = dataset;
    return data;
  }
  auto dataset = make_detection_dataset(input, training, uses_instance_masks(config.model), model_classes);
  data.size = dataset->size();
  data.load = [dataset](int64_t i) { return dataset->get(i); };
  data.num_classes = dataset->num_classes();
  data.class_names = dataset->class_names();
  for (int64_t k = 0; k < dataset->num_classes(); ++k) data.category_ids.push_back(dataset->label_to_category_id(k));
  if (training) {
    // A class the training data lacks (a label map's, or a resumed model's) still needs an id of
    // its own in the checkpoint, for the results files of predict and export: the next free one.
    int64_t next = 1;
    for (int64_t id : data.category_ids) next = std::max(next, id + 1);
    for (int64_t& id : data.category_ids)
      if (id < 0) id = next++;
  }
  data.detection = dataset;
  return data;
}

LoaderOptions make_loader_options(const PipelineConfig& config, const InputConfig& input, bool training,
                                  int64_t batch_size, int64_t input_size) {
  LoaderOptions o;
  o.batch_size = batch_size;
  o.num_workers = static_cast<int>(input.num_workers);
  o.prefetch_batches = static_cast<int>(input.prefetch);
  o.shuffle = training;
  o.replace_absent = training;  // an image left out (bad_images: skip): training batches keep their size
  o.seed = static_cast<uint64_t>(config.train.seed);
  o.epochs = training ? 0 : 1;
  o.sample_1_of_n = input.sample_1_of_n;
  o.augment.out_h = input_size;
  o.augment.out_w = input_size;
  o.augment.resize = AugmentOptions::Resize::kKeepAspect;
  o.collate.size_divisibility = input_size;
  if (config.model.resizer == "keep_aspect") {
    o.augment.resize = AugmentOptions::Resize::kMinMax;
    o.augment.min_max.min_dimension = static_cast<double>(config.model.min_dimension);
    o.augment.min_max.max_dimension = static_cast<double>(config.model.max_dimension);
    o.collate.size_divisibility = keep_aspect_size_divisibility(config.model);
  }
  for (int c = 0; c < 3; ++c) {
    o.collate.normalize.mean[c] = static_cast<float>(config.model.pixel_mean[c]);
    o.collate.normalize.std[c] = static_cast<float>(config.model.pixel_std[c]);
  }
  if (is_segmentation_model(config)) {
    // DeepLab: random scale by steps, crop padded with the mean colour and the ignore label
    // (train_input.augment's deeplab_scale_crop_pad); evaluation at full resolution (no resize, no
    // padding beyond the batch's largest image).
    o.augment.resize = AugmentOptions::Resize::kNone;
    o.augment.deeplab.scale_step = config.model.deeplab.scale_step;
    o.augment.deeplab.ignore_label = static_cast<uint8_t>(kIgnoreLabel);
    for (int c = 0; c < 3; ++c)
      o.augment.deeplab.image_fill[c] = static_cast<uint8_t>(std::lround(config.model.pixel_mean[c] * 255.0));
    o.collate.size_divisibility = 1;
  }
  if (training) {
    // train_input.augment, in order, on the loader's workers; a trailing model sizing step is the
    // resize policy itself.
    std::vector<AugmentStep> steps = training_steps(config, input);
    for (AugmentStep& s : steps) resolve_step_sizes(s, config, input_size);
    o.augment.resize = AugmentOptions::Resize::kNone;
    if (!steps.empty() && take_sizing_step(steps.back(), o.augment)) steps.pop_back();
    o.augment.steps = std::move(steps);
    o.augment.total_steps = config.train.num_steps;
    o.augment.drop_cut_boxes = input.box_policy == "drop";
  }
  return o;
}

}  // namespace detseg
