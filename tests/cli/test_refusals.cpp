// Right answers or a clear refusal, through the real binary: no output replaces an input, predict's
// pictures and image ids never collide, file names that are not UTF-8 keep their entries, and what
// goes wrong inside a library (the allocator, std::filesystem, nlohmann, miniz, CLI11) is one line
// in our words naming the path or field and the cause.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "command_runner.h"
#include "detseg/core/out_of_memory.h"
#include "temp_dir.h"
#include "tiny_model.h"
#include "test_paths.h"

namespace fs = std::filesystem;

namespace {

using detseg::testing::CommandRun;
using detseg::testing::read_text;

const std::string kDemo = std::string(DETSEG_SOURCE_DIR) + "/assets/demo";

CommandRun run_raw(const std::string& args) { return detseg::testing::run_command(std::string(DETSEG_BINARY) + " " + args); }
CommandRun run(const std::string& args) { return run_raw("--threads 2 " + args); }

// The one line a failed command prints, and its exit code.
void expect_refusal(const CommandRun& r, int code, const std::string& line) {
  EXPECT_EQ(r.code, code) << r.output;
  EXPECT_NE(r.output.find("detseg: error: " + line + "\n"), std::string::npos) << r.output;
}

// None of a library's own text reaches the user.
void expect_our_words(const CommandRun& r) {
  for (const char* library : {"json.exception", "miniz", "PytorchStreamReader", "filesystem error", "internal:",
                              "DefaultCPUAllocator", "not in range", "was not expected", "Run with --help"})
    EXPECT_EQ(r.output.find(library), std::string::npos) << library << " in: " << r.output;
}

using detseg::testing::TinyModel;
using detseg::testing::tiny_model;

std::string predict_args(const fs::path& input, const fs::path& output) {
  return "predict --config " + tiny_model().config + " --checkpoint " + tiny_model().checkpoint + " --input " +
         input.string() + " --output " + output.string();
}

}  // namespace

TEST(CliRefusal, NoOutputReplacesAnInput) {
  const TinyModel& m = tiny_model();
  const detseg::testing::TempDir temp("cli_refusals_outputs");
  const fs::path dir = temp.path();
  const std::string gt = (dir / "gt.json").string();
  fs::copy_file(kDemo + "/val.json", gt);
  const std::string gt_bytes = read_text(gt), config_bytes = read_text(m.config);

  // coco-eval: --json onto --gt, by its own name, through a symlink and through a hard link.
  const std::string dt = (dir / "dt.json").string();
  std::ofstream(dt) << "[]\n";
  fs::create_symlink(gt, dir / "link.json");
  fs::create_hard_link(gt, dir / "hard.json");
  for (const std::string& out : {gt, (dir / "link.json").string(), (dir / "hard.json").string()})
    expect_refusal(run("coco-eval --gt " + gt + " --dt " + dt + " --json " + out), 2,
                   "--json " + out + ": is the ground-truth file given by --gt; choose another path");
  expect_refusal(run("coco-eval --gt " + gt + " --dt " + dt + " --json " + dt), 2,
                 "--json " + dt + ": is the detections file given by --dt; choose another path");

  // eval: --json onto the config, --detections onto the annotations, the two outputs one file.
  const std::string eval = "eval --config " + m.config + " --checkpoint " + m.checkpoint +
                           " --set eval_input.annotations=" + gt;
  expect_refusal(run(eval + " --json " + m.config), 2,
                 "--json " + m.config + ": is the config given by --config; choose another path");
  expect_refusal(run(eval + " --detections " + gt), 2,
                 "--detections " + gt + ": is eval_input.annotations; choose another path");
  expect_refusal(run(eval + " --json " + m.checkpoint), 2,
                 "--json " + m.checkpoint + ": is the checkpoint evaluated; choose another path");
  const std::string both = (dir / "both.json").string();
  expect_refusal(run(eval + " --json " + both + " --detections " + both), 2,
                 "--detections " + both + ": is also the --json file; give each its own path");

  // export: onto the checkpoint, onto a _base_ file of the config, onto a folder.
  const std::string child = (dir / "child.yaml").string();
  std::ofstream(child) << "_base_: " << m.config << "\n";
  const std::string exp = "export --config " + child + " --checkpoint " + m.checkpoint + " --format safetensors -o ";
  expect_refusal(run(exp + m.checkpoint), 2,
                 "export: -o " + m.checkpoint + ": is the checkpoint given by --checkpoint; choose another path");
  expect_refusal(run(exp + m.config), 2,
                 "export: -o " + m.config + ": is a _base_ file of the config; choose another path");
  expect_refusal(run(exp + dir.string()), 2,
                 "export: -o " + dir.string() + ": is a folder; give a file path (e.g. " + (dir / "model.pt").string() + ")");

  // predict: --output is the image folder, or the checkpoint; a picture's name leads to an image.
  fs::create_directories(dir / "images");
  fs::copy_file(kDemo + "/images/BloodImage_00000.jpg", dir / "images" / "a.jpg");
  expect_refusal(run(predict_args(dir / "images", dir / "images")), 2,
                 "--output " + (dir / "images").string() + ": is the image folder given by --input; the pictures "
                 "would be written among the images (and read as images by the next run); choose another folder");
  expect_refusal(run(predict_args(dir / "images", m.checkpoint)), 2,
                 "--output " + m.checkpoint + ": is the checkpoint given by --checkpoint; choose another path");
  fs::create_directories(dir / "out");
  fs::create_symlink(dir / "images" / "a.jpg", dir / "out" / "a.jpg.png");
  expect_refusal(run(predict_args(dir / "images", dir / "out")), 2,
                 "--output " + (dir / "out" / "a.jpg.png").string() +
                     ": is an image of the folder given by --input; choose another path");

  // convert: onto a VOC annotation file; plot: onto its log.
  fs::create_directories(dir / "voc" / "Annotations");
  const std::string xml = (dir / "voc" / "Annotations" / "a.xml").string();
  std::ofstream(xml) << "<annotation><filename>a.jpg</filename><size><width>64</width><height>64</height>"
                        "</size></annotation>\n";
  expect_refusal(run("convert voc " + (dir / "voc").string() + " -o " + xml), 2,
                 "-o " + xml + ": is a file of the VOC folder " + (dir / "voc").string() +
                     " (its annotations, lists and images are what the conversion reads); choose another path");
  const std::string log = (m.dir / "model" / "metrics.jsonl").string();
  expect_refusal(run("plot " + (m.dir / "model").string() + " --out " + log), 2,
                 "--out " + log + ": is the training metrics log; choose another path");

  // Every input is as it was.
  EXPECT_EQ(read_text(gt), gt_bytes);
  EXPECT_EQ(read_text(m.config), config_bytes);
  EXPECT_TRUE(fs::is_symlink(dir / "out" / "a.jpg.png"));
  EXPECT_FALSE(fs::exists(both));
}

TEST(CliRefusal, ResumeRefusedForAChangedConfigKeepsPipelineYaml) {
  const TinyModel& m = tiny_model();
  const detseg::testing::TempDir temp("cli_refusals_resume");
  fs::copy(m.dir / "model", temp.path() / "model", fs::copy_options::recursive);
  const fs::path pipeline = temp.path() / "model" / "pipeline.yaml";
  const std::string before = read_text(pipeline);
  ASSERT_NE(before.find("fpn_channels: 32"), std::string::npos) << before;
  const CommandRun r = run("train --config " + m.config + " --model-dir " + (temp.path() / "model").string() +
                           " --set model.fpn_channels=16 --set train.num_steps=2");
  EXPECT_EQ(r.code, 1) << r.output;  // the checkpoint's FPN is 32 wide
  EXPECT_NE(r.output.find("ckpt-1.dsckpt"), std::string::npos) << r.output;
  EXPECT_EQ(read_text(pipeline), before);
}

TEST(CliRefusal, EvaluationSetNamesAreUnique) {
  const TinyModel& m = tiny_model();
  const std::string set = " --set 'eval_inputs.NAME={annotations: " + kDemo + "/val.json}'";
  auto with = [&](const std::string& name, const std::string& more) {
    std::string s = set;
    s.replace(s.find("NAME"), 4, name);
    return run("info --resolved --config " + m.config + s + more);
  };
  // (The line starts with where the keys came from: here the --set flags.)
  const CommandRun train = with("train", " --set eval.on_train=2"), eval = with("eval", "");
  EXPECT_EQ(train.code, 2) << train.output;
  EXPECT_NE(train.output.find(": eval_inputs.train: the name train is eval.on_train's set; each evaluation set needs "
                              "its own name (it names the set's files)\n"),
            std::string::npos)
      << train.output;
  EXPECT_EQ(eval.code, 2) << eval.output;
  EXPECT_NE(eval.output.find(": eval_inputs.eval: the name eval is eval_input's; each evaluation set needs its own "
                             "name (it names the set's files)\n"),
            std::string::npos)
      << eval.output;
  EXPECT_EQ(with("train", "").code, 0);  // without eval.on_train, train is a name like any other
  // Refused before anything is written: no model dir appears.
  const detseg::testing::TempDir temp("cli_refusals_sets");
  std::string s = set;
  s.replace(s.find("NAME"), 4, "eval");
  EXPECT_EQ(run("train --config " + m.config + " --model-dir " + (temp.path() / "m").string() + s).code, 2);
  EXPECT_FALSE(fs::exists(temp.path() / "m"));
}

TEST(CliPredict, PicturesAreNamedAfterTheWholeFileNameAndIdsNeverCollide) {
  const detseg::testing::TempDir temp("cli_refusals_predict");
  const fs::path in = temp.path() / "in";
  fs::create_directories(in);
  // Two val.json images (ids 1 and 2), a training image val.json lacks, and a.jpg / a.png, which
  // drew to one a.png before.
  fs::copy_file(kDemo + "/images/BloodImage_00000.jpg", in / "BloodImage_00000.jpg");
  fs::copy_file(kDemo + "/images/BloodImage_00002.jpg", in / "BloodImage_00002.jpg");
  fs::copy_file(kDemo + "/images/BloodImage_00001.jpg", in / "BloodImage_00001.jpg");
  fs::copy_file(kDemo + "/images/BloodImage_00000.jpg", in / "a.jpg");
  CommandRun r = run(predict_args(in, temp.path() / "first"));
  ASSERT_EQ(r.code, 0) << r.output;
  fs::copy_file(temp.path() / "first" / "a.jpg.png", in / "a.png");  // a real PNG, 640x480
  r = run(predict_args(in, temp.path() / "out"));
  ASSERT_EQ(r.code, 0) << r.output;
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(temp.path() / "out")) files.insert(e.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"BloodImage_00000.jpg.png", "BloodImage_00001.jpg.png",
                                          "BloodImage_00002.jpg.png", "a.jpg.png", "a.png.png", "detections.json",
                                          "images.json"}));
  // val.json's ids for its images; the others above its largest id (20), in file-name order.
  const nlohmann::json table = nlohmann::json::parse(read_text(temp.path() / "out" / "images.json"));
  std::map<std::string, int64_t> ids;
  for (const auto& image : table["images"]) {
    ids[image["file_name"]] = image["id"];
    EXPECT_EQ(image["width"], 640);
    EXPECT_EQ(image["height"], 480);
  }
  EXPECT_EQ(ids, (std::map<std::string, int64_t>{{"BloodImage_00000.jpg", 1}, {"BloodImage_00001.jpg", 21},
                                                 {"BloodImage_00002.jpg", 2}, {"a.jpg", 22}, {"a.png", 23}}));
  const nlohmann::json detections = nlohmann::json::parse(read_text(temp.path() / "out" / "detections.json"));
  std::map<std::string, std::set<int64_t>> by_name;
  for (const auto& d : detections) by_name[d["file_name"]].insert(d["image_id"].get<int64_t>());
  ASSERT_EQ(by_name.size(), 5u);
  for (const auto& [name, id] : ids) EXPECT_EQ(by_name[name], std::set<int64_t>{id}) << name;
}

TEST(CliPredict, AFileNameThatIsNotUtf8KeepsEveryImagesDetections) {
  const detseg::testing::TempDir temp("cli_refusals_utf8");
  const fs::path in = temp.path() / "in";
  fs::create_directories(in);
  fs::copy_file(kDemo + "/images/BloodImage_00000.jpg", in / "a.jpg");
  fs::copy_file(kDemo + "/images/BloodImage_00001.jpg", in / std::string("b\xff.jpg"));  // byte 0xFF: not UTF-8
  const CommandRun r = run(predict_args(in, temp.path() / "out"));
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json detections = nlohmann::json::parse(read_text(temp.path() / "out" / "detections.json"));
  std::map<std::string, size_t> count;
  for (const auto& d : detections) ++count[d["file_name"]];
  // 100 detections each (score threshold 0): the escaped name is the four characters \xFF.
  EXPECT_EQ(count, (std::map<std::string, size_t>{{"a.jpg", 100}, {"b\\xFF.jpg", 100}}));
  const nlohmann::json table = nlohmann::json::parse(read_text(temp.path() / "out" / "images.json"));
  ASSERT_EQ(table["images"].size(), 2u);
  EXPECT_EQ(table["images"][1]["file_name"], "b\\xFF.jpg");
  EXPECT_TRUE(fs::exists(temp.path() / "out" / std::string("b\xff.jpg.png")));  // on disk as it was
}

TEST(CliPredict, CocoEvalRefusesDetectionsNumberedForAnotherDataSet) {
  const detseg::testing::TempDir temp("cli_refusals_ids");
  const fs::path in = temp.path() / "in";
  fs::create_directories(in);
  fs::copy_file(kDemo + "/images/BloodImage_00000.jpg", in / "BloodImage_00000.jpg");
  fs::copy_file(kDemo + "/images/BloodImage_00002.jpg", in / "BloodImage_00002.jpg");
  ASSERT_EQ(run(predict_args(in, temp.path() / "out")).code, 0);
  const std::string dt = (temp.path() / "out" / "detections.json").string();
  const std::string images = (temp.path() / "out" / "images.json").string();
  const std::string val = kDemo + "/val.json";
  // The images val.json numbers as predict did: scored, and the table agrees.
  CommandRun ok = run("coco-eval --gt " + val + " --dt " + dt + " --images " + images);
  EXPECT_EQ(ok.code, 0) << ok.output;
  // A ground truth whose images 1 and 2 swapped names: the ids belong to another data set.
  nlohmann::json swapped = nlohmann::json::parse(read_text(val));
  std::swap(swapped["images"][0]["file_name"], swapped["images"][1]["file_name"]);
  const std::string other = (temp.path() / "swapped.json").string();
  std::ofstream(other) << swapped.dump();
  expect_refusal(run("coco-eval --gt " + other + " --dt " + dt), 1,
                 dt + ": result 0: image 1 is BloodImage_00000.jpg here but BloodImage_00002.jpg in " + other +
                     ": the ids were numbered for another data set");
  // The table alone, with detections that do not name their files.
  nlohmann::json bare = nlohmann::json::parse(read_text(dt));
  for (auto& d : bare) d.erase("file_name");
  const std::string bare_dt = (temp.path() / "bare.json").string();
  std::ofstream(bare_dt) << bare.dump();
  expect_refusal(run("coco-eval --gt " + other + " --dt " + bare_dt + " --images " + images), 1,
                 images + ": images[0]: image 1 is BloodImage_00000.jpg here but BloodImage_00002.jpg in " + other +
                     ": the ids were numbered for another data set");
  // An image outside val.json gets id 21; val.json has no such image.
  fs::copy_file(kDemo + "/images/BloodImage_00001.jpg", in / "BloodImage_00001.jpg");
  ASSERT_EQ(run(predict_args(in, temp.path() / "out3")).code, 0);
  const std::string table3 = (temp.path() / "out3" / "images.json").string();
  expect_refusal(run("coco-eval --gt " + val + " --dt " + bare_dt + " --images " + table3), 1,
                 table3 + ": images[1]: image 21 (BloodImage_00001.jpg) is not in the ground truth " + val);
}

TEST(CliRefusal, FlagErrorsAreOneLineWithTheRealRange) {
  const CommandRun threads = run_raw("--threads -1 info");
  EXPECT_EQ(threads.code, 2);
  EXPECT_EQ(threads.output, "detseg: error: --threads: expected a whole number in [0, 1024], got \"-1\"; see "
                            "`detseg info --help`\n");
  expect_refusal(run("info --frob"), 2, "unknown flag --frob; see `detseg info --help`");
  expect_refusal(run("frobnicate"), 2,
                 "frobnicate: not a subcommand (train, eval, predict, coco-eval, convert, export, plot, fetch, "
                 "check-data, augment, info); see `detseg --help`");
  expect_refusal(run("eval --config"), 2, "--config: needs a value; see `detseg eval --help`");
  expect_refusal(run("eval --config /nonexistent.yaml --checkpoint x"), 2,
                 "--config: /nonexistent.yaml: no such file; see `detseg eval --help`");
  expect_refusal(run("coco-eval --gt a --dt b --iou-type keypoints"), 2,
                 "--iou-type: expected one of bbox, segm, got \"keypoints\"; see `detseg coco-eval --help`");
  for (const char* bad : {"nan", "-0.1", "1.5", "x"})
    expect_refusal(run(std::string("predict --checkpoint c --input i --output o --score-threshold ") + bad), 2,
                   std::string("--score-threshold: expected a number in [0, 1], got \"") + bad +
                       "\"; see `detseg predict --help`");
  // --help and --version still print and succeed.
  const CommandRun help = run("predict --help"), version = run("--version");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.output.find("--score-threshold"), std::string::npos) << help.output;
  EXPECT_EQ(version.code, 0);
  EXPECT_EQ(version.output.rfind("detseg ", 0), 0u) << version.output;
}

TEST(CliRefusal, NanIsRefusedInTheConfig) {
  const detseg::testing::TempDir temp("cli_refusals_nan");
  const std::string config = (temp.path() / "nan.yaml").string();
  std::ofstream(config) << "model:\n  num_classes: 3\npostprocess:\n  score_threshold: .nan\n";
  expect_refusal(run("info --resolved --config " + config), 2,
                 config + ":4: postprocess.score_threshold: expected a number in [0, 1], got \".nan\"");
  std::ofstream(config) << "model:\n  num_classes: 3\n";
  const CommandRun set = run("info --resolved --config " + config + " --set postprocess.score_threshold=nan");
  EXPECT_EQ(set.code, 2) << set.output;
  EXPECT_NE(set.output.find("postprocess.score_threshold: expected a number in [0, 1], got \"nan\"\n"), std::string::npos)
      << set.output;
}

// Sizes no machine holds fail at once, before anything that size is allocated, saying what and why.
TEST(CliRefusal, TooLargeToFitIsRefusedBeforeAllocating) {
  const TinyModel& m = tiny_model();
  const detseg::testing::TempDir temp("cli_refusals_large");
  // 100000 classes with 128 anchors a location (8 scales x 16 ratios): the class head alone holds
  // 256 x 128 x 9 weights per class, 29.5 G parameters (118 GB).
  const std::string big = (temp.path() / "big.yaml").string();
  std::ofstream(big) << "_base_: " << m.config << "\nmodel: {num_classes: 100000, fpn_channels: 256, num_scales: 8, "
                        "aspect_ratios: [0.25, 0.5, 1.0, 2.0, 4.0, 0.3, 0.6, 1.2, 2.4, 4.8, 0.4, 0.8, 1.6, 3.2, 6.4, 0.7]}\n";
  auto start = std::chrono::steady_clock::now();
  const CommandRun train = run("train --config " + big + " --model-dir " + (temp.path() / "m").string());
  EXPECT_EQ(train.code, 2) << train.output;
  EXPECT_NE(train.output.find("detseg: error: " + big + ": model.num_classes 100000: a retinanet with 100000 classes "
                              "has 29.52 G parameters (118.1 GB); training needs at least 354.3 GB for them (weights, "
                              "gradients, the momentum), more than the "),
            std::string::npos)
      << train.output;
  EXPECT_FALSE(fs::exists(temp.path() / "m"));  // nothing written
  const CommandRun exported = run("export --config " + big + " --checkpoint " + m.checkpoint +
                                  " --format safetensors -o " + (temp.path() / "big.safetensors").string());
  EXPECT_EQ(exported.code, 2) << exported.output;
  EXPECT_NE(exported.output.find("model.num_classes 100000: a retinanet with 100000 classes has 29.52 G parameters "
                                 "(118.1 GB), more than the "),
            std::string::npos)
      << exported.output;
  // A traced input of 100000 x 100000 pixels: 120 GB before the first layer.
  expect_refusal(run("export --config " + m.config + " --checkpoint " + m.checkpoint + " --format torchscript -o " +
                     (temp.path() / "x.pt").string() + " --height 100000 --width 100000"),
                 2,
                 "export: --height 100000: above 8192, the longest image side detseg resizes to "
                 "(model.max_dimension's limit); a 100000x100000 input alone would take 120.0 GB");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30);
  expect_our_words(train);
  expect_our_words(exported);
}

// A VOC image with 100000 objects, matched against 698k anchors (128 a location at 512 px): the
// training step asks for a block of hundreds of GB, refused with its size.
TEST(CliRefusal, AnAllocationTooLargeForTheMachineNamesItsSize) {
  const detseg::testing::TempDir temp("cli_refusals_voc");
  const fs::path voc = temp.path() / "voc";
  fs::create_directories(voc / "Annotations");
  fs::create_directories(voc / "JPEGImages");
  fs::copy_file(kDemo + "/images/BloodImage_00000.jpg", voc / "JPEGImages" / "a.jpg");
  {
    std::ofstream xml(voc / "Annotations" / "a.xml");
    xml << "<annotation><filename>a.jpg</filename><size><width>640</width><height>480</height><depth>3</depth></size>";
    for (int i = 0; i < 100000; ++i) {
      const int x = 1 + (i * 37) % 600, y = 1 + (i * 53) % 440;
      xml << "<object><name>cell</name><bndbox><xmin>" << x << "</xmin><ymin>" << y << "</ymin><xmax>" << x + 30
          << "</xmax><ymax>" << y + 30 << "</ymax></bndbox></object>";
    }
    xml << "</annotation>\n";
  }
  const std::string config = (temp.path() / "voc.yaml").string();
  std::ofstream(config) << "model: {type: retinanet, num_classes: 1, backbone: resnet18, fpn_channels: 32, "
                           "image_size: 512, num_scales: 8, aspect_ratios: [0.25, 0.5, 1.0, 2.0, 4.0, 0.3, 0.6, 1.2, "
                           "2.4, 4.8, 0.4, 0.8, 1.6, 3.2, 6.4, 0.7]}\n"
                           "train: {batch_size: 1, num_steps: 1}\n"
                           "train_input: {format: voc, annotations: " << voc.string() << ", num_workers: 0}\n";
  const CommandRun r = run("train --config " + config + " --model-dir " + (temp.path() / "m").string());
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("detseg: error: train: out of memory: a block of "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" GB was asked for, and "), std::string::npos) << r.output;
  expect_our_words(r);
}

TEST(CliRefusal, FilesystemErrorsNameThePathAndTheCause) {
  const TinyModel& m = tiny_model();
  const detseg::testing::TempDir temp("cli_refusals_fs");
  // export onto an existing folder (std::filesystem's "cannot rename: Is a directory" before).
  fs::create_directories(temp.path() / "out");
  const CommandRun folder = run("export --config " + m.config + " --checkpoint " + m.checkpoint +
                                " --format torchscript -o " + (temp.path() / "out").string());
  expect_refusal(folder, 2,
                 "export: -o " + (temp.path() / "out").string() + ": is a folder; give a file path (e.g. " +
                     (temp.path() / "out" / "model.pt").string() + ")");
  // A symlink loop among predict's images.
  const fs::path in = temp.path() / "in";
  fs::create_directories(in);
  fs::copy_file(kDemo + "/images/BloodImage_00000.jpg", in / "a.jpg");
  fs::create_symlink("loop.jpg", in / "loop.jpg");
  const CommandRun loop = run(predict_args(in, temp.path() / "pred"));
  expect_refusal(loop, 1, (in / "loop.jpg").string() + ": a symlink loop (the link leads back to itself)");
  // A config path that is a symlink loop (std::filesystem's exception ended the process before).
  const fs::path config = temp.path() / "loop.yaml";
  fs::create_symlink("loop.yaml", config);
  const CommandRun config_loop = run("eval --config " + config.string() + " --checkpoint " + m.checkpoint);
  expect_refusal(config_loop, 2,
                 "--config: " + config.string() + ": a symlink loop (the link leads back to itself); see `detseg eval "
                 "--help`");
  expect_our_words(folder);
  expect_our_words(loop);
  expect_our_words(config_loop);
}

TEST(CliRefusal, MalformedMetricsLineIsFileLineAndWhat) {
  const detseg::testing::TempDir temp("cli_refusals_plot");
  const fs::path log = temp.path() / "metrics.jsonl";
  const std::string first = "{\"step\": 5, \"split\": \"train\", \"total_loss\": 1.5}\n";
  const std::map<std::string, std::string> cases = {
      {"not json", "not a JSON record: unexpected 'o' at column 2"},
      {"{\"step\": 6, \"total_loss\"", "the line ends before its JSON record does (cut short?)"},
      {"[1, 2]", "expected a JSON object {\"step\": ..., ...}, got a JSON array"},
      {"{\"step\": 1.5}", "\"step\" is not a whole number"},
      {"{\"split\": \"train\"}", "no \"step\" (each line is one record: {\"step\": N, ...})"},
  };
  for (const auto& [line, what] : cases) {
    std::ofstream(log) << first << line << "\n";
    const CommandRun r = run("plot " + temp.str());
    expect_refusal(r, 1, log.string() + ":2: " + what);
    expect_our_words(r);
  }
}

TEST(CliRefusal, TruncatedPretrainedWeightsAreToldInOurWords) {
  const TinyModel& m = tiny_model();
  const detseg::testing::TempDir temp("cli_refusals_pth");
  const std::string bytes = read_text(std::string(DETSEG_SOURCE_DIR) + "/tests/fixtures/pth/mixed.pth");
  const std::string cut = (temp.path() / "cut.pth").string();
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  const CommandRun r = run("train --config " + m.config + " --model-dir " + (temp.path() / "m").string() +
                           " --set model.pretrained=" + cut);
  expect_refusal(r, 1, cut + ": truncated or not a torch.save zip file (no zip directory at its end: the file is cut "
                             "short, or not a zip file)");
  expect_our_words(r);
}

// LibTorch's allocators' messages (the CPU one's and the CUDA caching allocator's, as 2.11 words
// them), retold with the size; anything else is not an allocation failure.
TEST(CliRefusal, LibraryAllocationFailuresAreRetoldWithTheirSize) {
  EXPECT_EQ(detseg::out_of_memory_text("DefaultCPUAllocator: can't allocate memory: you tried to allocate 78566400000 "
                                       "bytes. Error code 12 (Cannot allocate memory)\nException raised from ..."),
            "out of memory: a block of 78.6 GB was asked for, and the system refused it");
  EXPECT_EQ(detseg::out_of_memory_text("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of "
                                       "79.19 GiB of which 3.20 GiB is free. Including non-PyTorch memory, ..."),
            "out of GPU memory: a block of 20.00 GiB was asked for; GPU 0 has 3.20 GiB free of 79.19 GiB");
  EXPECT_EQ(detseg::out_of_memory_text("out of memory: a block of 558.7 GB was asked for, and 22.5 GB of memory is "
                                       "available"),
            "out of memory: a block of 558.7 GB was asked for, and 22.5 GB of memory is available");
  EXPECT_EQ(detseg::out_of_memory_text("std::bad_alloc"), "out of memory");
  EXPECT_EQ(detseg::out_of_memory_text("shape '[2, 3]' is invalid for input of size 7"), "");
}
