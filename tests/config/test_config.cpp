// Config loading: defaults, overrides, and every kind of mistake named with file:line and key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "detseg/config/config.h"
#include "detseg/config/registry.h"
#include "detseg/core/error.h"

using detseg::ConfigError;
using detseg::parse_config;

namespace {

const char* kMinimal =
    "model:\n"
    "  num_classes: 3\n"
    "train:\n"
    "  batch_size: 4\n"
    "  schedule:\n"
    "    type: cosine\n"
    "train_input:\n"
    "  annotations: data/train.json\n";

std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(yaml, "configs/x.yaml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(Config, DefaultsAndValues) {
  auto c = parse_config(kMinimal, "configs/x.yaml");
  EXPECT_EQ(c.model.num_classes, 3);
  EXPECT_EQ(c.model.type, "retinanet");
  EXPECT_EQ(c.train.batch_size, 4);
  EXPECT_EQ(c.train.schedule.type, "cosine");
  EXPECT_EQ(c.postprocess.max_detection_points, 5000);
  // Relative paths are anchored at the config file's folder.
  EXPECT_EQ(c.train_input.annotations, "configs/data/train.json");
}

TEST(Config, WrongTypeNamesFileLineAndKey) {
  std::string yaml = kMinimal;
  yaml.replace(yaml.find("batch_size: 4"), 13, "batch_size: four");
  EXPECT_EQ(error_of(yaml), "configs/x.yaml:4: train.batch_size: expected an integer in [1, 4096], got \"four\"");
}

TEST(Config, OutOfRange) {
  std::string yaml = kMinimal;
  yaml.replace(yaml.find("batch_size: 4"), 13, "batch_size: 0");
  EXPECT_EQ(error_of(yaml), "configs/x.yaml:4: train.batch_size: expected an integer in [1, 4096], got \"0\"");
}

TEST(Config, UnknownKey) {
  std::string yaml = std::string(kMinimal) + "eval:\n  clas_agnostic: true\n";
  EXPECT_EQ(error_of(yaml), "configs/x.yaml:10: eval.clas_agnostic: unknown key (known here: batch_size, "
                            "class_agnostic, every_steps, metric, on_train, pictures, voc_use_07_metric)");
  EXPECT_NE(error_of(std::string(kMinimal) + "modle: {}\n").find("configs/x.yaml:9: modle: unknown key"),
            std::string::npos);
}

TEST(Config, UnknownName) {
  std::string yaml = kMinimal;
  yaml.replace(yaml.find("cosine"), 6, "cosnie");
  EXPECT_NE(error_of(yaml).find("configs/x.yaml:6: train.schedule.type: expected one of constant, stepwise"),
            std::string::npos);
}

TEST(Config, MalformedYaml) {
  EXPECT_NE(error_of("model:\n  num_classes: [1, 2\n").find("configs/x.yaml:"), std::string::npos);
  EXPECT_NE(error_of("model:\n  num_classes: [1, 2\n").find("malformed YAML"), std::string::npos);
}

TEST(Config, SectionMustBeMapping) {
  EXPECT_EQ(error_of("model: 3\n"), "configs/x.yaml:1: model: expected a mapping of keys, got \"3\"");
}

TEST(Config, Overrides) {
  auto c = parse_config(kMinimal, "configs/x.yaml",
                        {"train.batch_size=8", "model.aspect_ratios=[1.0, 2.0]", "eval.class_agnostic=true",
                         "train_input.annotations=other.json"});
  EXPECT_EQ(c.train.batch_size, 8);
  ASSERT_EQ(c.model.aspect_ratios.size(), 2u);
  EXPECT_DOUBLE_EQ(c.model.aspect_ratios[1], 2.0);
  EXPECT_TRUE(c.eval.class_agnostic);
  // A path given on the command line is relative to the working directory, not the config.
  EXPECT_EQ(c.train_input.annotations, "other.json");
  EXPECT_EQ(error_of(kMinimal, {"train.batch_size=four"}),
            "--set train.batch_size=four: train.batch_size: expected an integer in [1, 4096], got \"four\"");
  EXPECT_NE(error_of(kMinimal, {"train.bacth_size=4"}).find("train.bacth_size: unknown key"), std::string::npos);
  EXPECT_NE(error_of(kMinimal, {"nonsense"}).find("expected key.path=value"), std::string::npos);
}

TEST(Config, ConsistencyChecks) {
  EXPECT_NE(error_of("train: {batch_size: 2}\n").find("model.num_classes: required"), std::string::npos);
  EXPECT_NE(error_of("model: {type: efficientdet, num_classes: 2, image_size: 500}\n").find("multiple of 2^max_level = 128"),
            std::string::npos);
  EXPECT_EQ(error_of("model: {type: retinanet, num_classes: 2, image_size: 500}\n"), "no error");  // any size: ResNet + FPN
  // Mask R-CNN on C4: one anchor grid (layer3), and a crop that survives the max-pool.
  const std::string c4 = "model: {type: mask_rcnn, num_classes: 2, faster_rcnn: {feature_extractor: c4, "
                         "first_stage_anchor_sizes: [256]";
  EXPECT_EQ(error_of(c4 + ", number_of_stages: 3}}\n"), "no error");
  EXPECT_NE(error_of(c4 + ", initial_crop_size: 1}}\n").find("initial_crop_size (1) must be at least maxpool_kernel_size (2)"),
            std::string::npos);
  EXPECT_NE(error_of(c4 + ", number_of_stages: 1}}\n").find("mask_rcnn needs 2 or 3 stages"), std::string::npos);
  // eval.metric names an evaluator of the model's kind.
  EXPECT_EQ(error_of("model: {type: retinanet, num_classes: 2}\neval: {metric: voc}\n"), "no error");
  EXPECT_NE(error_of("model: {type: retinanet, num_classes: 2}\neval: {metric: miou}\n")
                .find("eval.metric: miou scores label maps; a detector takes coco or voc"),
            std::string::npos);
  EXPECT_NE(error_of("model: {type: deeplabv3, num_classes: 2}\neval: {metric: coco}\n")
                .find("eval.metric: coco scores detections; a segmentation model takes miou"),
            std::string::npos);
  EXPECT_NE(error_of("model: {type: retinanet, num_classes: 2}\neval: {metric: ap}\n").find("eval.metric"),
            std::string::npos);
  // model.backbone: what the model type's line in config/parts.def takes.
  EXPECT_EQ(error_of("model: {type: deeplabv3, num_classes: 2, backbone: xception65}\n"), "no error");
  EXPECT_NE(error_of("model: {type: faster_rcnn, num_classes: 2, backbone: mobilenet_v2}\n")
                .find("model.backbone: faster_rcnn takes resnet18, resnet34, resnet50, resnet101; got mobilenet_v2"),
            std::string::npos);
  EXPECT_EQ(error_of("model: {type: efficientdet, num_classes: 2, image_size: 512}\n"), "no error");  // picks its own
  // torchvision's DeepLabHead conv: DeepLabv3 only (DeepLabv3+'s decoder has its own 3x3 convs).
  EXPECT_EQ(error_of("model: {type: deeplabv3, num_classes: 2, deeplab: {head_conv: true}}\n"), "no error");
  EXPECT_NE(error_of("model: {type: deeplabv3plus, num_classes: 2, deeplab: {head_conv: true}}\n")
                .find("model.deeplab.head_conv: deeplabv3 only"),
            std::string::npos);
  // Per-class loss weights: one per class.
  EXPECT_EQ(error_of("model: {type: deeplabv3, num_classes: 2, deeplab: {class_weights: [0.5, 2]}}\n"), "no error");
  EXPECT_NE(error_of("model: {type: deeplabv3, num_classes: 3, deeplab: {class_weights: [0.5, 2]}}\n")
                .find("model.deeplab.class_weights: one weight per class, 3 (model.num_classes), got 2"),
            std::string::npos);
}

TEST(Config, EvalMetricsAndModelRulesComeFromThePartTables) {
  // eval.metric: the DETSEG_EVALUATOR lines, each for the model kind it scores.
  std::vector<std::string> names;
  for (const detseg::EvaluatorInfo& e : detseg::evaluators()) {
    names.push_back(e.name);
    const std::string model = e.label_maps ? "deeplabv3" : "retinanet";
    EXPECT_EQ(error_of("model: {type: " + model + ", num_classes: 2}\neval: {metric: " + e.name + "}\n"), "no error")
        << e.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"coco", "voc", "miou"}));
  // A model's own rules (its line's check, config/model_checks.cpp): the retinanet head's GroupNorm
  // needs channels in 32 groups; models without that head do not read head_norm and refuse it.
  EXPECT_EQ(error_of("model: {type: retinanet, num_classes: 2, fpn_channels: 64, head_norm: group_norm}\n"), "no error");
  EXPECT_NE(error_of("model: {type: retinanet, num_classes: 2, fpn_channels: 48, head_norm: group_norm}\n")
                .find("model.head_norm: group_norm is for the retinanet head with a width that is a multiple of 32 "
                      "(32 groups), got retinanet with retinanet head and 48 channels"),
            std::string::npos);
  EXPECT_NE(error_of("model: {type: faster_rcnn, num_classes: 2, head_norm: group_norm}\n")
                .find("got faster_rcnn with its own head"),
            std::string::npos);
  EXPECT_NE(error_of("model: {type: efficientdet, num_classes: 2, head_norm: group_norm}\n")
                .find("got efficientdet with efficientdet head"),
            std::string::npos);
  EXPECT_EQ(error_of("model: {type: efficientdet, num_classes: 2, head: retinanet, head_norm: group_norm}\n"),
            "no error");
  // The width is the size's (efficientdet_sizes.h): D0's 64 takes 32 groups, D1's 88 does not.
  EXPECT_NE(error_of("model: {type: efficientdet, efficientdet: d1, num_classes: 2, head: retinanet, head_norm: group_norm}\n")
                .find("got efficientdet with retinanet head and 88 channels"),
            std::string::npos);
  // model.neck / model.head: the DETSEG_NECK / DETSEG_DENSE_HEAD lines, for the dense detectors.
  EXPECT_EQ(error_of("model: {type: retinanet, num_classes: 2, neck: bifpn, head: efficientdet}\n"), "no error");
  EXPECT_NE(error_of("model: {type: retinanet, num_classes: 2, neck: pafpn}\n").find("one of \"\", fpn, bifpn"),
            std::string::npos);
  EXPECT_NE(error_of("model: {type: mask_rcnn, num_classes: 2, head: retinanet}\n")
                .find("model.neck/model.head: mask_rcnn has its own; they choose RetinaNet's and EfficientDet's"),
            std::string::npos);
  // RetinaNet's and EfficientDet's networks have P3-P7 built in: other levels fail at parse time.
  EXPECT_NE(error_of("model: {type: retinanet, num_classes: 2, min_level: 4}\n")
                .find("model.min_level/max_level: the RetinaNet and EfficientDet networks produce P3-P7"),
            std::string::npos);
  // model.box_loss: the DETSEG_BOX_LOSS lines, for the dense detectors only; its weight -1 (the
  // default) or >= 0.
  std::vector<std::string> box_losses;
  for (const detseg::BoxLossInfo& b : detseg::box_losses()) {
    box_losses.push_back(b.name);
    EXPECT_EQ(error_of("model: {type: efficientdet, num_classes: 2, box_loss: " + b.name + "}\n"), "no error") << b.name;
  }
  EXPECT_EQ(box_losses, (std::vector<std::string>{"huber", "l1", "smooth_l1", "giou"}));
  EXPECT_NE(error_of("model: {type: retinanet, num_classes: 2, box_loss: iou}\n").find("model.box_loss"),
            std::string::npos);
  EXPECT_NE(error_of("model: {type: retinanet, num_classes: 2, box_loss_weight: -0.5}\n")
                .find("model.box_loss_weight: -1 (the box loss's own weight) or >= 0, got -0.5"),
            std::string::npos);
  EXPECT_NE(error_of("model: {type: faster_rcnn, num_classes: 2, box_loss: giou}\n")
                .find("model.box_loss/box_loss_weight are RetinaNet's and EfficientDet's; faster_rcnn does not read"),
            std::string::npos);
  // What the engine asks of a model type, from its line.
  EXPECT_TRUE(detseg::find_model_type("mask_rcnn")->instance_masks);
  EXPECT_FALSE(detseg::find_model_type("faster_rcnn")->instance_masks);
  EXPECT_EQ(detseg::find_model_type("retinanet")->backbone_scope, "backbone.body.");
  detseg::ModelConfig m;
  m.type = "efficientdet";
  m.max_level = 7;
  EXPECT_EQ(detseg::keep_aspect_size_divisibility(m), 128);  // 2^max_level: BiFPN halves exactly
  m.type = "retinanet";
  EXPECT_EQ(detseg::keep_aspect_size_divisibility(m), 32);
}

TEST(Config, ResolvedYamlRoundTrips) {
  auto c = parse_config(kMinimal, "configs/x.yaml", {"model.focal_gamma=1.5"});
  std::string text = detseg::config_to_yaml(c);
  auto again = parse_config(text, "/abs/resolved.yaml");
  EXPECT_EQ(again.train.batch_size, 4);
  EXPECT_DOUBLE_EQ(again.model.focal_gamma, 1.5);
  EXPECT_EQ(again.train.schedule.type, "cosine");
  // Already-anchored relative paths get anchored again at the new file's folder.
  EXPECT_EQ(again.train_input.annotations, "/abs/configs/data/train.json");
}

TEST(Config, ReferenceListsEveryKey) {
  std::string doc = detseg::config_reference_markdown();
  EXPECT_NE(doc.find("`train.schedule.warmup_steps`"), std::string::npos);
  EXPECT_NE(doc.find("`model.num_classes`"), std::string::npos);
  EXPECT_NE(doc.find("`eval_input.format`"), std::string::npos);
}

// train.schedule.* and the optimizer keys land in the structs train/ consumes directly.
TEST(Config, TrainKeysFillTheTrainOptions) {
  auto c = parse_config(kMinimal, "configs/x.yaml",
                        {"train.schedule.drop_steps=[30, 40]", "train.schedule.slow_start_learning_rate=0.002",
                         "train.optimizer.weight_decay=0.05", "train.l2_weight=0.0004",
                         "train.gradient_multipliers=['(^|\\.)bias$=2', 'head=0.1', 'a=b=2.5']",
                         "train.clip_gradients_norm=5", "train.freeze_pattern=^backbone\\."});
  EXPECT_EQ(c.train.schedule.drop_steps, (std::vector<int64_t>{30, 40}));
  EXPECT_DOUBLE_EQ(c.train.schedule.slow_start_learning_rate, 0.002);
  EXPECT_DOUBLE_EQ(c.train.optimizer.adamw_weight_decay, 0.05);
  EXPECT_DOUBLE_EQ(c.train.optimizer.l2_weight, 0.0004);
  EXPECT_DOUBLE_EQ(c.train.optimizer.clip_gradients_norm, 5.0);
  EXPECT_EQ(c.train.optimizer.freeze_pattern, "^backbone\\.");
  ASSERT_EQ(c.train.optimizer.multipliers.size(), 3u);
  EXPECT_EQ(c.train.optimizer.multipliers[0].pattern, "(^|\\.)bias$");
  EXPECT_DOUBLE_EQ(c.train.optimizer.multipliers[0].factor, 2.0);
  EXPECT_DOUBLE_EQ(c.train.optimizer.multipliers[1].factor, 0.1);
  EXPECT_EQ(c.train.optimizer.multipliers[2].pattern, "a=b");  // the last '=' splits
  EXPECT_DOUBLE_EQ(c.train.optimizer.multipliers[2].factor, 2.5);
  // The resolved YAML writes them back as "regex=factor" with the factor exact.
  auto again = parse_config(detseg::config_to_yaml(c), "/abs/resolved.yaml");
  ASSERT_EQ(again.train.optimizer.multipliers.size(), 3u);
  EXPECT_EQ(again.train.optimizer.multipliers[1].pattern, "head");
  EXPECT_EQ(again.train.optimizer.multipliers[1].factor, 0.1);
  EXPECT_DOUBLE_EQ(again.train.optimizer.l2_weight, 0.0004);
}

TEST(Config, MalformedGradientMultiplierNamesLineAndEntry) {
  std::string yaml = std::string(kMinimal);
  yaml.insert(yaml.find("train_input:"), "  gradient_multipliers: [\"bias=2\", \"head\"]\n");
  EXPECT_EQ(error_of(yaml), "configs/x.yaml:7: train.gradient_multipliers[1]: expected \"regex=factor\" with a "
                            "number >= 0 after the last '=', got \"head\"");
  yaml = std::string(kMinimal);
  yaml.insert(yaml.find("train_input:"), "  gradient_multipliers: [\"bias=-1\"]\n");
  EXPECT_NE(error_of(yaml).find("train.gradient_multipliers[0]: expected"), std::string::npos);
}

// train.fine_tune.* fills train/'s FineTuneOptions directly: "ours=theirs" prefixes become anchored
// scope rules, checked at config time, and written back as they were given.
TEST(Config, FineTuneKeysFillTheFineTuneOptions) {
  auto c = parse_config(kMinimal, "configs/x.yaml",
                        {"train.fine_tune.scope_map=['backbone.=body.', 'fpn.=']", "train.fine_tune.all_variables=true",
                         "train.fine_tune.exclude=^head\\.", "train.fine_tune.type=classification"});
  const detseg::FineTuneOptions& f = c.train.fine_tune;
  ASSERT_EQ(f.scope_map.size(), 2u);
  EXPECT_EQ(f.scope_map[0].pattern, "^backbone.");
  EXPECT_EQ(f.scope_map[0].replacement, "body.");
  EXPECT_EQ(f.scope_map[1].pattern, "^fpn.");
  EXPECT_EQ(f.scope_map[1].replacement, "");
  EXPECT_TRUE(f.load_all_detection_vars);
  EXPECT_EQ(f.exclude_pattern, "^head\\.");
  EXPECT_EQ(f.type, "classification");
  EXPECT_TRUE(f.skip_missing);  // the config's default
  auto again = parse_config(detseg::config_to_yaml(c), "/abs/resolved.yaml");
  ASSERT_EQ(again.train.fine_tune.scope_map.size(), 2u);
  EXPECT_EQ(again.train.fine_tune.scope_map[0].pattern, "^backbone.");
  EXPECT_EQ(again.train.fine_tune.scope_map[1].replacement, "");
  std::string yaml = std::string(kMinimal);
  yaml.insert(yaml.find("train_input:"), "  fine_tune:\n    scope_map: [\"a=b\", \"nomap\"]\n");
  EXPECT_EQ(error_of(yaml), "configs/x.yaml:8: train.fine_tune.scope_map[1]: expected \"ours=theirs\", got \"nomap\"");
}

// model.pretrained is a URL (kept as written) or a path (anchored at the config's folder); its
// hash is checked at load time, with the key and line.
TEST(Config, PretrainedUrlOrPathAndItsHash) {
  const std::string url = "https://download.pytorch.org/models/resnet50-0676ba61.pth";
  auto c = parse_config(std::string(kMinimal), "configs/x.yaml", {"model.pretrained=" + url});
  EXPECT_EQ(c.model.pretrained, url);
  EXPECT_EQ(c.model.pretrained_sha256, "");
  std::string yaml = kMinimal;
  yaml.insert(yaml.find("train:"), "  pretrained: " + url + "\n");
  EXPECT_EQ(parse_config(yaml, "configs/x.yaml").model.pretrained, url);
  EXPECT_EQ(parse_config(detseg::config_to_yaml(parse_config(yaml, "configs/x.yaml")), "/abs/r.yaml").model.pretrained,
            url);
  yaml = kMinimal;
  yaml.insert(yaml.find("train:"), "  pretrained: weights/r50.pth\n  pretrained_sha256: 0676BA61\n");
  c = parse_config(yaml, "configs/x.yaml");
  EXPECT_EQ(c.model.pretrained, "configs/weights/r50.pth");
  EXPECT_EQ(c.model.pretrained_sha256, "0676BA61");
  yaml = kMinimal;
  yaml.insert(yaml.find("train:"), "  pretrained: weights/r50.pth\n  pretrained_sha256: 0676ba6x\n");
  EXPECT_EQ(error_of(yaml), "configs/x.yaml:4: model.pretrained_sha256: expected 8 to 64 hex digits (a SHA-256 or "
                            "its start), got \"0676ba6x\"");
  EXPECT_EQ(error_of(kMinimal, {"model.pretrained=https://example.org/weights.pth"}),
            "--set model.pretrained=https://example.org/weights.pth: model.pretrained_sha256: required for "
            "https://example.org/weights.pth (its file name "
            "carries no -<hash>. as torchvision's do): the file's SHA-256, or its first 8+ hex digits");
  EXPECT_EQ(error_of(kMinimal, {"model.pretrained_sha256=0676ba61"}),
            "--set model.pretrained_sha256=0676ba61: model.pretrained_sha256 is set but model.pretrained is empty");
  EXPECT_EQ(error_of(kMinimal, {"model.pretrained=s3://bucket/resnet50-0676ba61.pth"}),
            "--set model.pretrained=s3://bucket/resnet50-0676ba61.pth: model.pretrained: "
            "s3://bucket/resnet50-0676ba61.pth: unsupported URL scheme 's3' (http, https or file)");
}

TEST(Config, EmptyListsAreRefusedByTheirKey) {
  EXPECT_EQ(error_of(kMinimal, {"model.aspect_ratios=[]"}),
            "--set model.aspect_ratios=[]: model.aspect_ratios: expected a list of 1 to 16 values, got 0");
  std::string yaml = std::string(kMinimal) + "  \n";
  yaml.replace(yaml.find("model:\n"), 7, "model:\n  pixel_mean: [0.5, 0.5]\n");
  EXPECT_EQ(error_of(yaml), "configs/x.yaml:2: model.pixel_mean: expected a list of 3 values, got 2");
  EXPECT_EQ(error_of(kMinimal, {"model.faster_rcnn.first_stage_anchor_scales=[]"}),
            "--set model.faster_rcnn.first_stage_anchor_scales=[]: model.faster_rcnn.first_stage_anchor_scales: "
            "expected a list of 1 to 16 values, got 0");
  EXPECT_EQ(error_of(kMinimal, {"model.deeplab.eval_scales=[]"}),
            "--set model.deeplab.eval_scales=[]: model.deeplab.eval_scales: expected a list of 1 to 16 values, got 0");
}

TEST(Config, EmptyValueIsAnErrorNotTheDefault) {
  EXPECT_EQ(error_of(kMinimal, {"train.num_steps="}),
            "--set train.num_steps=: train.num_steps: expected a value (remove the key to keep the default), got nothing");
  std::string yaml = kMinimal;
  yaml.replace(yaml.find("batch_size: 4"), 13, "batch_size:");
  EXPECT_EQ(error_of(yaml),
            "configs/x.yaml:4: train.batch_size: expected a value (remove the key to keep the default), got nothing");
  // An empty section is still an empty section.
  EXPECT_EQ(error_of(std::string(kMinimal) + "eval:\n"), "no error");
}

TEST(Config, DuplicateKeysAreRefused) {
  std::string yaml = kMinimal;
  yaml.replace(yaml.find("  batch_size: 4\n"), 16, "  batch_size: 4\n  batch_size: 8\n");
  EXPECT_EQ(error_of(yaml), "configs/x.yaml:5: train.batch_size: duplicate key (first set at line 4)");
  EXPECT_EQ(error_of(std::string(kMinimal) + "model: {}\n"), "configs/x.yaml:9: model: duplicate key (first set at line 1)");
}

TEST(Config, ScalarOrListRootNamesTheFile) {
  EXPECT_EQ(error_of("just text\n"),
            "configs/x.yaml:1: expected a mapping of keys (model:, train:, ...) at the top level, got \"just text\"");
  EXPECT_EQ(error_of("- a\n- b\n", {"train.num_steps=3"}),
            "configs/x.yaml:1: expected a mapping of keys (model:, train:, ...) at the top level, got a list");
}

namespace {

std::string write_configs(const std::string& name, const std::vector<std::pair<std::string, std::string>>& files) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("detseg_test_config_" + name);
  std::filesystem::remove_all(dir);
  for (const auto& [file, text] : files) {
    std::filesystem::create_directories((dir / file).parent_path());
    std::ofstream(dir / file) << text;
  }
  return dir.string();
}

std::string load_error(const std::string& path, const std::vector<std::string>& overrides = {}) {
  try {
    detseg::load_config(path, overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(ConfigBase, ChildWinsKeyByKeyAndPathsStayWithTheirFile) {
  const std::string dir = write_configs("base", {
      {"bases/model.yaml", "model:\n  num_classes: 3\n  image_size: 320\n  aspect_ratios: [1.0, 2.0]\n"
                           "train_input:\n  annotations: data/train.json\n"},
      {"bases/schedule.yaml", "train:\n  num_steps: 100\n  batch_size: 2\n  schedule: {type: cosine}\n"},
      {"child.yaml", "_base_: [bases/model.yaml, bases/schedule.yaml]\n"
                     "model:\n  image_size: 256\n  aspect_ratios: [1.0]\n"
                     "train:\n  batch_size: 4\n"},
  });
  const detseg::PipelineConfig c = detseg::load_config(dir + "/child.yaml", {"train.num_steps=7"});
  EXPECT_EQ(c.model.num_classes, 3);                                // from the first base
  EXPECT_EQ(c.model.image_size, 256);                               // the child wins
  EXPECT_EQ(c.model.aspect_ratios, std::vector<double>({1.0}));     // lists are replaced, not merged
  EXPECT_EQ(c.train.batch_size, 4);
  EXPECT_EQ(c.train.schedule.type, "cosine");                       // from the second base
  EXPECT_EQ(c.train.num_steps, 7);                                  // --set over everything
  // A relative path is anchored at the folder of the file that wrote it.
  EXPECT_EQ(c.train_input.annotations, dir + "/bases/data/train.json");
}

TEST(ConfigBase, ErrorsNameTheFileAndLineTheKeyCameFrom) {
  const std::string dir = write_configs("base_errors", {
      {"base.yaml", "model:\n  num_classes: 3\n  image_sise: 320\n"},
      {"child.yaml", "_base_: base.yaml\ntrain:\n  batch_size: 4\n"},
      {"bad_value_base.yaml", "train:\n  num_steps: lots\n"},
      {"child2.yaml", "model: {num_classes: 3}\n_base_: bad_value_base.yaml\n"},
      {"missing.yaml", "_base_: nope.yaml\n"},
      {"a.yaml", "_base_: b.yaml\n"},
      {"b.yaml", "_base_: a.yaml\n"},
  });
  EXPECT_EQ(load_error(dir + "/child.yaml").substr(0, (dir + "/base.yaml:3: model.image_sise: unknown key").size()),
            dir + "/base.yaml:3: model.image_sise: unknown key");
  EXPECT_EQ(load_error(dir + "/child2.yaml"),
            dir + "/bad_value_base.yaml:2: train.num_steps: expected an integer >= 1, got \"lots\"");
  EXPECT_EQ(load_error(dir + "/missing.yaml"), dir + "/missing.yaml:1: _base_: " + dir + "/nope.yaml: config file not found");
  EXPECT_NE(load_error(dir + "/a.yaml").find("is already being read (a cycle of _base_ configs)"), std::string::npos);
}

TEST(Config, EvalInputsAreNamedSectionsInFileOrder) {
  const std::string yaml = std::string(kMinimal) +
                           "eval_inputs:\n"
                           "  val: {annotations: data/val.json, images: img}\n"
                           "  hard-cases: {annotations: data/hard.json, max_images: 5}\n"
                           "eval: {on_train: 7}\n";
  const auto c = parse_config(yaml, "configs/x.yaml");
  ASSERT_EQ(c.eval_inputs.size(), 2u);
  EXPECT_EQ(c.eval_inputs[0].first, "val");
  EXPECT_EQ(c.eval_inputs[0].second.annotations, "configs/data/val.json");
  EXPECT_EQ(c.eval_inputs[1].first, "hard-cases");
  EXPECT_EQ(c.eval_inputs[1].second.max_images, 5);
  EXPECT_EQ(c.eval.on_train, 7);
  // Each set's keys are checked like eval_input's, with the set's name in the key path.
  EXPECT_NE(error_of(yaml, {"eval_inputs.val.max_imgs=3"})
                .find("--set eval_inputs.val.max_imgs=3: eval_inputs.val.max_imgs: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kMinimal) + "eval_inputs:\n  \"a b\": {annotations: x.json}\n")
                .find("eval_inputs.a b: a set name uses letters, digits, '_' and '-'"),
            std::string::npos);
  // The resolved YAML lists them and reads back the same.
  const auto again = parse_config(detseg::config_to_yaml(c), "resolved.yaml");  // paths already anchored
  ASSERT_EQ(again.eval_inputs.size(), 2u);
  EXPECT_EQ(again.eval_inputs[1].first, "hard-cases");
  EXPECT_EQ(again.eval_inputs[1].second.annotations, "configs/data/hard.json");
}
