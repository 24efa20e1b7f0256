// Classes are matched by name wherever a model meets data: evaluation of a data set whose
// categories are listed in another order (or with other ids, or as the VOC copy of the same boxes)
// scores exactly what the original order scores; label maps order, rename and refuse classes for
// COCO, VOC and YOLO inputs; resume and fine-tuning keep the checkpoint's class order; a data set
// with a class the model lacks, empty or duplicate class names, an empty evaluation set and a
// training set without a usable box are refused before the first step.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/data/readers/coco.h"
#include "detseg/engine/evaluate.h"
#include "detseg/engine/inputs.h"
#include "detseg/engine/train_loop.h"
#include "detseg/models/detector.h"
#include "detseg/train/checkpoint.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace fs = std::filesystem;

namespace {

const std::string kImages = std::string(DETSEG_SOURCE_DIR) + "/assets/demo/images";

// The first `count` demo training images with their boxes.
detseg::CocoDataset demo_subset(size_t count) {
  detseg::CocoDataset all = detseg::read_coco(std::string(DETSEG_SOURCE_DIR) + "/assets/demo/train.json");
  detseg::CocoDataset s;
  s.categories = all.categories;  // RBC 1, WBC 2, Platelets 3
  for (size_t i = 0; i < count; ++i) s.images.push_back(all.images[i]);
  for (const auto& a : all.annotations)
    for (const auto& img : s.images)
      if (a.image_id == img.id) s.annotations.push_back(a);
  return s;
}

// The same boxes with the categories listed as Platelets, RBC, WBC under new ids 7, 8, 9.
detseg::CocoDataset reordered(detseg::CocoDataset s) {
  const std::map<int64_t, int64_t> new_id = {{1, 8}, {2, 9}, {3, 7}};
  s.categories = {{7, "Platelets", ""}, {8, "RBC", ""}, {9, "WBC", ""}};
  for (auto& a : s.annotations) a.category_id = new_id.at(a.category_id);
  return s;
}

// The same boxes as a Pascal VOC folder (classes sorted by name: Platelets, RBC, WBC).
void write_voc(const detseg::CocoDataset& s, const fs::path& dir) {
  fs::create_directories(dir / "Annotations");
  fs::create_directories(dir / "JPEGImages");
  fs::create_directories(dir / "ImageSets/Main");
  std::ofstream list(dir / "ImageSets/Main/val.txt");
  for (const auto& img : s.images) {
    const std::string stem = fs::path(img.file_name).stem().string();
    fs::create_symlink(fs::path(kImages) / img.file_name, dir / "JPEGImages" / img.file_name);
    list << stem << "\n";
    std::ofstream xml(dir / "Annotations" / (stem + ".xml"));
    xml << "<annotation><filename>" << img.file_name << "</filename><size><width>" << img.width << "</width><height>"
        << img.height << "</height><depth>3</depth></size>\n";
    for (const auto& a : s.annotations) {
      if (a.image_id != img.id) continue;
      xml << "<object><name>" << s.categories[static_cast<size_t>(a.category_id - 1)].name
          << "</name><difficult>0</difficult><bndbox><xmin>" << a.bbox[0] << "</xmin><ymin>" << a.bbox[1]
          << "</ymin><xmax>" << a.bbox[0] + a.bbox[2] << "</xmax><ymax>" << a.bbox[1] + a.bbox[3]
          << "</ymax></bndbox></object>\n";
    }
    xml << "</annotation>\n";
  }
}

std::string input_yaml(const std::string& annotations, const std::string& extra = "") {
  return "{annotations: '" + annotations + "', images: '" + kImages + "', num_workers: 1" + extra + "}";
}

std::string config_yaml(const std::string& train_input, const std::string& eval_input, int steps) {
  return "model: {type: retinanet, num_classes: 3, backbone: resnet18, image_size: 128, fpn_channels: 32,\n"
         "        frozen_batch_norm: false, trainable_backbone_stages: 5}\n"
         "postprocess: {score_threshold: 0.01}\n"
         "train: {batch_size: 2, num_steps: " + std::to_string(steps) + ", seed: 1, checkpoint_every: " +
         std::to_string(steps) + ", log_every: 100,\n"
         "        optimizer: {type: adam}, schedule: {type: constant, learning_rate: 0.002}}\n"
         "train_input: " + train_input + "\neval: {batch_size: 2}\neval_input: " + eval_input + "\n";
}

std::string config_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const detseg::ConfigError& e) {
    return e.what();
  } catch (const detseg::Error& e) {
    return std::string("Error (not ConfigError): ") + e.what();
  }
  return "no error";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

// A detector that answers from a table (image id -> detections in its own label order): what it
// finds is known exactly, so its scores under each listing of the same boxes are comparable
// without training anything.
class TableDetector : public detseg::DetectorImpl {
 public:
  explicit TableDetector(std::map<int64_t, detseg::Boxes> table) : table_(std::move(table)) {}
  detseg::ModelLosses losses(const detseg::Batch&) override { return {at::zeros({}), {}}; }
  std::vector<detseg::Boxes> detect(const detseg::Batch& batch) override {
    std::vector<detseg::Boxes> out;
    for (int64_t id : batch.image_ids) out.push_back(table_.at(id));
    return out;
  }
  int64_t input_size() const override { return 128; }

 private:
  std::map<int64_t, detseg::Boxes> table_;
};

// Detections for the demo images in the label order RBC 0, WBC 1, Platelets 2: every RBC found
// (score 0.8), each platelet called an RBC (0.9: false positives ranked first), each WBC box
// shifted by a quarter of its width (found at IoU 0.5, missed at 0.75). Per-class AP: RBC below
// 1, WBC about half, Platelets 0: a class paired by position would change every figure.
std::map<int64_t, detseg::Boxes> imperfect_detections(const detseg::CocoDataset& data) {
  std::map<int64_t, detseg::Boxes> table;
  for (const auto& img : data.images) {
    std::vector<float> boxes, scores;
    std::vector<int64_t> labels;
    for (const auto& a : data.annotations) {
      if (a.image_id != img.id) continue;
      const double shift = a.category_id == 2 ? 0.25 * a.bbox[2] : 0.0;
      boxes.insert(boxes.end(), {static_cast<float>(a.bbox[0] + shift), static_cast<float>(a.bbox[1]),
                                 static_cast<float>(a.bbox[0] + shift + a.bbox[2]), static_cast<float>(a.bbox[1] + a.bbox[3])});
      scores.push_back(a.category_id == 3 ? 0.9f : 0.8f);
      labels.push_back(a.category_id == 2 ? 1 : 0);
    }
    const int64_t n = static_cast<int64_t>(labels.size());
    detseg::Boxes b;
    b.boxes = at::tensor(boxes, at::kFloat).reshape({n, 4});
    b.scores = at::tensor(scores, at::kFloat);
    b.classes = at::tensor(labels, at::kLong);
    table[img.id] = b;
  }
  return table;
}

// A model that names its classes RBC, WBC, Platelets scores the same on the same boxes listed as
// Platelets, RBC, WBC under other ids, and on their VOC copy (classes sorted by name).
TEST(ClassNames, ReorderedCategoriesAndTheVocCopyScoreTheSame) {
  const detseg::testing::TempDir dir("class_names");
  detseg::write_coco(demo_subset(2), (dir / "train.json").string());
  detseg::write_coco(reordered(demo_subset(2)), (dir / "reordered.json").string());
  write_voc(demo_subset(2), dir / "voc");
  TableDetector model(imperfect_detections(demo_subset(2)));
  model.class_names = {"RBC", "WBC", "Platelets"};
  const std::string train = input_yaml((dir / "train.json").string());
  auto evaluate = [&](const std::string& eval_input) {
    detseg::PipelineConfig c = detseg::parse_config(config_yaml(train, eval_input, 1), (dir / "c.yaml").string());
    return detseg::evaluate_model(c, model, 1).metrics;
  };
  const detseg::Metrics original = evaluate(train);
  const detseg::Metrics moved = evaluate(input_yaml((dir / "reordered.json").string()));
  const detseg::Metrics voc = evaluate("{format: voc, annotations: '" + (dir / "voc").string() +
                                       "', split: val, num_workers: 1}");
  EXPECT_GT(original.get("AP/RBC"), 0.3);
  EXPECT_LT(original.get("AP/RBC"), 0.99);
  EXPECT_GT(original.get("AP50/WBC"), 0.99);
  EXPECT_LT(original.get("AP/WBC"), 0.7);
  EXPECT_EQ(original.get("AP/Platelets"), 0.0);
  for (const char* key : {"AP", "AP50", "AP75", "AR100", "AP/RBC", "AP/WBC", "AP/Platelets"}) {
    EXPECT_EQ(moved.get(key), original.get(key)) << key;
    EXPECT_EQ(voc.get(key), original.get(key)) << key;
  }
}

// A data set with a class the model does not know is refused, naming both sides; a set lacking
// one of the model's classes is scored on the classes it has.
TEST(ClassNames, UnknownClassIsRefusedNamingBothSides) {
  const detseg::testing::TempDir dir("class_names_unknown");
  detseg::CocoDataset other = demo_subset(2);
  other.categories[2].name = "Platelet";  // singular: not the model's name
  detseg::write_coco(other, (dir / "other.json").string());
  detseg::PipelineConfig config = detseg::parse_config(
      config_yaml(input_yaml((dir / "other.json").string()), input_yaml((dir / "other.json").string()), 1),
      (dir / "c.yaml").string());
  const std::string error = config_error([&] {
    detseg::make_input_data(config, config.eval_input, false, {"RBC", "WBC", "Platelets"});
  });
  EXPECT_TRUE(contains(error, "categories ['Platelet'] are not among the model's classes ['RBC', 'WBC', 'Platelets']"))
      << error;
  EXPECT_TRUE(contains(error, "other.json")) << error;

  detseg::CocoDataset two = demo_subset(2);
  two.categories.pop_back();  // no Platelets category, and no Platelets boxes
  two.annotations.erase(std::remove_if(two.annotations.begin(), two.annotations.end(),
                                       [](const detseg::CocoAnnotation& a) { return a.category_id == 3; }),
                        two.annotations.end());
  detseg::write_coco(two, (dir / "two.json").string());
  config.eval_input.annotations = (dir / "two.json").string();
  const detseg::InputData data = detseg::make_input_data(config, config.eval_input, false, {"WBC", "Platelets", "RBC"});
  EXPECT_EQ(data.class_names, (std::vector<std::string>{"WBC", "Platelets", "RBC"}));
  EXPECT_EQ(data.category_ids, (std::vector<int64_t>{2, -1, 1}));
}

// label_map works for COCO, VOC and YOLO inputs: it orders the classes, renames a COCO category by
// its id, and refuses a class it does not list; a missing label map names its file.
TEST(ClassNames, LabelMapOrdersRenamesAndRefuses) {
  const detseg::testing::TempDir dir("class_names_label_map");
  detseg::write_coco(demo_subset(2), (dir / "train.json").string());
  write_voc(demo_subset(2), dir / "voc");
  std::ofstream(dir / "order.txt") << "Platelets\nWBC\nRBC\n";
  std::ofstream(dir / "renamed.txt") << "1 red\n2 white\n3 Platelets\n";
  std::ofstream(dir / "short.txt") << "RBC\nWBC\n";
  auto data_for = [&](const std::string& input) {
    detseg::PipelineConfig c = detseg::parse_config(config_yaml(input, input, 1), (dir / "c.yaml").string());
    return detseg::make_input_data(c, c.train_input, true);
  };
  const std::string coco = (dir / "train.json").string();
  const detseg::InputData ordered = data_for(input_yaml(coco, ", label_map: '" + (dir / "order.txt").string() + "'"));
  EXPECT_EQ(ordered.class_names, (std::vector<std::string>{"Platelets", "WBC", "RBC"}));
  EXPECT_EQ(ordered.category_ids, (std::vector<int64_t>{3, 2, 1}));  // the file's ids, in the map's order
  const detseg::Example first = ordered.load(0);
  const detseg::InputData plain = data_for(input_yaml(coco));
  EXPECT_TRUE(first.classes.equal(2 - plain.load(0).classes)) << "RBC 0 -> 2, WBC 1 -> 1, Platelets 2 -> 0";

  const detseg::InputData renamed = data_for(input_yaml(coco, ", label_map: '" + (dir / "renamed.txt").string() + "'"));
  EXPECT_EQ(renamed.class_names, (std::vector<std::string>{"red", "white", "Platelets"}));

  const std::string voc = "{format: voc, annotations: '" + (dir / "voc").string() + "', split: val, num_workers: 1";
  EXPECT_EQ(data_for(voc + ", label_map: '" + (dir / "order.txt").string() + "'}").class_names,
            (std::vector<std::string>{"Platelets", "WBC", "RBC"}));
  EXPECT_EQ(data_for(voc + "}").class_names, (std::vector<std::string>{"Platelets", "RBC", "WBC"}));  // sorted

  std::string error = config_error([&] { data_for(input_yaml(coco, ", label_map: '" + (dir / "short.txt").string() + "'")); });
  EXPECT_TRUE(contains(error, "category 'Platelets' (id 3) is not in the label map")) << error;
  error = config_error([&] { data_for(voc + ", label_map: '" + (dir / "short.txt").string() + "'}"); });
  EXPECT_TRUE(contains(error, "unknown class 'Platelets' (not in the label map)")) << error;
  error = config_error([&] { data_for(input_yaml(coco, ", label_map: '" + (dir / "absent.txt").string() + "'")); });
  EXPECT_TRUE(contains(error, "absent.txt")) << error;

  // YOLO: data.yaml's names, ordered by the map.
  fs::create_directories(dir / "yolo/images/train");
  fs::create_directories(dir / "yolo/labels/train");
  fs::copy_file(fs::path(kImages) / "BloodImage_00001.jpg", dir / "yolo/images/train/a.jpg");
  std::ofstream(dir / "yolo/labels/train/a.txt") << "1 0.5 0.5 0.2 0.2\n0 0.3 0.3 0.1 0.1\n";
  std::ofstream(dir / "yolo/data.yaml") << "path: " << (dir / "yolo").string() << "\ntrain: images/train\n"
                                        << "names: {0: RBC, 1: WBC, 2: Platelets}\n";
  const std::string yolo = "{format: yolo, annotations: '" + (dir / "yolo/data.yaml").string() + "', num_workers: 1";
  const detseg::InputData y = data_for(yolo + ", label_map: '" + (dir / "order.txt").string() + "'}");
  EXPECT_EQ(y.class_names, (std::vector<std::string>{"Platelets", "WBC", "RBC"}));
  EXPECT_TRUE(y.load(0).classes.equal(at::tensor({1, 2}, at::kLong))) << y.load(0).classes;
}

// Empty or duplicate class names in a data set are refused (the model could not tell them apart).
TEST(ClassNames, EmptyOrDuplicateNamesAreRefused) {
  const detseg::testing::TempDir dir("class_names_dup");
  detseg::CocoDataset dup = demo_subset(1);
  dup.categories[2].name = "RBC";
  detseg::write_coco(dup, (dir / "dup.json").string());
  detseg::CocoDataset empty = demo_subset(1);
  empty.categories[1].name = "";
  detseg::write_coco(empty, (dir / "empty.json").string());
  for (const auto& [file, expected] : std::vector<std::pair<std::string, std::string>>{
           {"dup.json", "two categories are named 'RBC' (ids 1 and 3)"}, {"empty.json", "category id 2 has an empty name"}}) {
    const std::string input = input_yaml((dir / file).string());
    detseg::PipelineConfig c = detseg::parse_config(config_yaml(input, input, 1), (dir / "c.yaml").string());
    std::string error;
    try {
      detseg::make_input_data(c, c.train_input, true);
    } catch (const detseg::Error& e) {
      error = e.what();
    }
    EXPECT_TRUE(contains(error, expected)) << file << ": " << error;
  }
}

// Resume keeps the checkpoint's class order whatever order the data lists its categories in, and
// refuses data with a class the checkpoint does not have; fine-tuning adopts its checkpoint's
// order (classes: match), refuses other classes naming both sides, or starts the class layers
// afresh (classes: drop).
TEST(ClassNames, ResumeAndFineTuneKeepTheCheckpointsClasses) {
  const detseg::testing::TempDir dir("class_names_resume");
  detseg::write_coco(demo_subset(2), (dir / "train.json").string());
  detseg::write_coco(reordered(demo_subset(2)), (dir / "reordered.json").string());
  detseg::CocoDataset other = demo_subset(2);
  other.categories[2].name = "Platelet";
  detseg::write_coco(other, (dir / "other.json").string());
  const std::string path = (dir / "c.yaml").string();
  auto config = [&](const std::string& annotations, int steps, const std::string& extra = "") {
    const std::string input = input_yaml((dir / annotations).string());
    return detseg::parse_config(config_yaml(input, input, steps) + extra, path);
  };
  const std::string model = (dir / "model").string();
  detseg::train_model(config("train.json", 2), model);
  const detseg::TrainResult resumed = detseg::train_model(config("reordered.json", 4), model);
  EXPECT_EQ(detseg::checkpoint_class_names(resumed.last_checkpoint),
            (std::vector<std::string>{"RBC", "WBC", "Platelets"}));
  std::string error = config_error([&] { detseg::train_model(config("other.json", 6), model); });
  EXPECT_TRUE(contains(error, "categories ['Platelet'] are not among the model's classes")) << error;

  detseg::PipelineConfig ft = config("reordered.json", 1);
  ft.train.fine_tune.checkpoint = resumed.last_checkpoint;
  ft.train.fine_tune.load_all_detection_vars = true;
  const detseg::TrainResult tuned = detseg::train_model(ft, (dir / "tuned").string());
  EXPECT_EQ(detseg::checkpoint_class_names(tuned.last_checkpoint),
            (std::vector<std::string>{"RBC", "WBC", "Platelets"}));  // the checkpoint's order, not the file's

  detseg::PipelineConfig bad = config("other.json", 1);
  bad.train.fine_tune = ft.train.fine_tune;
  error = config_error([&] { detseg::train_model(bad, (dir / "bad").string()); });
  EXPECT_TRUE(contains(error, "categories ['Platelet'] are not among the model's classes ['RBC', 'WBC', 'Platelets']"))
      << error;
  bad.train.fine_tune.class_map = {"Platelet=Platelets"};
  const detseg::TrainResult mapped = detseg::train_model(bad, (dir / "mapped").string());
  EXPECT_EQ(detseg::checkpoint_class_names(mapped.last_checkpoint),
            (std::vector<std::string>{"RBC", "WBC", "Platelet"}));

  detseg::PipelineConfig drop = config("other.json", 1);
  drop.train.fine_tune = ft.train.fine_tune;
  drop.train.fine_tune.classes = "drop";
  drop.train.schedule.learning_rate = 1e-12;  // so the loaded weights stay what the checkpoint holds
  const detseg::TrainResult dropped = detseg::train_model(drop, (dir / "drop").string());
  EXPECT_EQ(detseg::checkpoint_class_names(dropped.last_checkpoint),
            (std::vector<std::string>{"RBC", "WBC", "Platelet"}));  // the data's own order
  const detseg::Checkpoint source = detseg::read_checkpoint(resumed.last_checkpoint);
  const detseg::Checkpoint after = detseg::read_checkpoint(dropped.last_checkpoint);
  std::map<std::string, at::Tensor> trained(after.model.begin(), after.model.end());
  int class_layers = 0, others = 0, same = 0;
  for (const auto& [name, tensor] : source.model) {
    const at::Tensor& other_tensor = trained.at(name);
    if (name.find("running_") != std::string::npos || name.find("num_batches") != std::string::npos) continue;
    if (name.find("cls_logits") != std::string::npos) {
      ++class_layers;
      EXPECT_FALSE(at::allclose(tensor, other_tensor, 0, 1e-3)) << name << " was loaded";
    } else {
      ++others;
      same += at::allclose(tensor, other_tensor, 0, 1e-8);
    }
  }
  EXPECT_EQ(class_layers, 2);  // weight and bias
  EXPECT_GT(others, 90);
  EXPECT_EQ(same, others);  // every other layer came from the checkpoint
}

// Found before the first step, not after training: an evaluation set without images, and a
// training set in which no box is usable.
TEST(ClassNames, EmptyEvalSetAndBoxlessTrainingSetAreRefusedBeforeTraining) {
  const detseg::testing::TempDir dir("class_names_empty");
  detseg::write_coco(demo_subset(2), (dir / "train.json").string());
  detseg::CocoDataset none = demo_subset(2);
  none.images.clear();
  none.annotations.clear();
  detseg::write_coco(none, (dir / "none.json").string());
  detseg::CocoDataset boxless = demo_subset(2);
  boxless.annotations.clear();
  detseg::write_coco(boxless, (dir / "boxless.json").string());
  const std::string path = (dir / "c.yaml").string();
  const std::string train = input_yaml((dir / "train.json").string());

  std::string error;
  try {
    detseg::train_model(detseg::parse_config(config_yaml(train, input_yaml((dir / "none.json").string()), 50), path),
                        (dir / "m1").string());
  } catch (const detseg::Error& e) {
    error = e.what();
  }
  EXPECT_TRUE(contains(error, "none.json: empty dataset (no images)")) << error;
  EXPECT_FALSE(fs::exists(dir / "m1"));  // a refused run leaves no model dir behind

  error = config_error([&] {
    detseg::train_model(detseg::parse_config(config_yaml(input_yaml((dir / "boxless.json").string()), train, 50), path),
                        (dir / "m2").string());
  });
  EXPECT_TRUE(contains(error, "boxless.json: no usable box to train on")) << error;
  EXPECT_FALSE(fs::exists(dir / "m2"));

  // A model dir that exists keeps what it holds: its train.log gains no line from a refused run.
  fs::create_directories(dir / "m3");
  std::ofstream(dir / "m3" / "train.log") << "an earlier run\n";
  error = config_error([&] {
    detseg::train_model(detseg::parse_config(config_yaml(input_yaml((dir / "boxless.json").string()), train, 50), path),
                        (dir / "m3").string());
  });
  EXPECT_TRUE(contains(error, "boxless.json: no usable box to train on")) << error;
  std::ifstream log(dir / "m3" / "train.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_EQ(text.str(), "an earlier run\n");
}
