// `detseg check-data`: every problem of a folder of images in one pass, one line each, in our words
// (never libjpeg's), with the exit code the configured policies give; and `detseg train` checking
// its evaluation sets before its first step.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "command_runner.h"
#include "data/image_test_files.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace fs = std::filesystem;

namespace {

detseg::testing::CommandRun run(const std::string& args) {
  return detseg::testing::run_command(std::string(DETSEG_BINARY) + " " + args);
}

void write(const fs::path& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// dir/: good.jpg, cut.jpg (its last bytes gone: the last third of its rows), noeoi.jpg (no end-of-image marker), text.jpg
// (not an image), turned.jpg (EXIF orientation 6, annotated as stored) and, in val.json only,
// missing.jpg. Every image 64x48 as stored, one box each; good.jpg's second box sticks out.
struct BadFolder {
  detseg::testing::TempDir temp{"check_data"};
  fs::path dir = temp.path();
  std::string config;

  BadFolder() {
    fs::create_directories(dir);
    const std::string jpeg = detseg::datatest::jpeg_bytes(detseg::datatest::test_pattern(64, 48));
    write(dir / "good.jpg", jpeg);
    write(dir / "cut.jpg", jpeg.substr(0, jpeg.size() - 12));  // its last 10 data bytes and the end marker
    write(dir / "noeoi.jpg", detseg::datatest::without_end_marker(jpeg));
    write(dir / "text.jpg", "not an image at all");
    write(dir / "turned.jpg", detseg::datatest::jpeg_with_exif(jpeg, 6));
    std::string images, annotations;
    int id = 0;
    for (const char* name : {"good.jpg", "cut.jpg", "noeoi.jpg", "text.jpg", "missing.jpg", "turned.jpg"}) {
      ++id;
      images += std::string(id > 1 ? "," : "") + "{\"id\": " + std::to_string(id) + ", \"file_name\": \"" + name +
                "\", \"width\": 64, \"height\": 48}";
      annotations += std::string(id > 1 ? "," : "") + "{\"id\": " + std::to_string(id) + ", \"image_id\": " +
                     std::to_string(id) + ", \"category_id\": 1, \"bbox\": [4, 4, 20, 20], \"area\": 400, \"iscrowd\": 0}";
    }
    annotations += ",{\"id\": 99, \"image_id\": 1, \"category_id\": 1, \"bbox\": [50, 4, 30, 20], \"area\": 600, \"iscrowd\": 0}";
    write(dir / "val.json", "{\"images\": [" + images + "], \"annotations\": [" + annotations +
                                "], \"categories\": [{\"id\": 1, \"name\": \"cell\"}]}");
    config = (dir / "check.yaml").string();
    write(config, "model: {type: retinanet, num_classes: 1}\n"
                  "eval_input: {annotations: val.json, images: .}\n");
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }
};

bool has_line(const std::string& output, const std::string& line) {
  return ("\n" + output + "\n").find("\n" + line + "\n") != std::string::npos;
}

}  // namespace

TEST(CheckData, HasHelpAndNeedsAConfig) {
  detseg::testing::CommandRun r = run("check-data --help");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("--config"), std::string::npos) << r.output;
  EXPECT_EQ(run("check-data").code, 2);
  EXPECT_NE(run("--help").output.find("check-data"), std::string::npos);
}

TEST(CheckData, ListsEveryProblemInOnePassAndExitsOneWhenAPolicyWouldStop) {
  const BadFolder f;
  const detseg::testing::CommandRun r = run("check-data --config " + f.config);
  EXPECT_EQ(r.code, 1) << r.output;
  const std::string& out = r.output;
  EXPECT_TRUE(has_line(out, f.path("cut.jpg") + ": cannot decode image (truncated JPEG: its data stops at row 32 of 48: "
                                                "33.3% of its rows are missing, more than 5%)")) << out;
  EXPECT_TRUE(has_line(out, f.path("noeoi.jpg") + ": JPEG ends without its end-of-image marker; every row was decoded, "
                                                  "and the image is used")) << out;
  EXPECT_TRUE(has_line(out, f.path("text.jpg") + ": cannot decode image (not a JPEG, PNG, BMP or PNM file)")) << out;
  EXPECT_TRUE(has_line(out, f.path("missing.jpg") + ": missing image file")) << out;
  EXPECT_TRUE(has_line(out, f.path("turned.jpg") + ": EXIF orientation 6 makes it 48x64 but the annotation says 64x48: " +
                                f.path("val.json") + " was made on the image as stored, and detseg turns images upright "
                                "first, as PIL's exif_transpose does (annotate the upright image, or remove the file's "
                                "orientation tag)")) << out;
  EXPECT_TRUE(has_line(out, f.path("val.json") + ": of 7 boxes, 1 clipped to their image and 0 dropped outside it "
                                                 "(box_policy: clip), 0 dropped with zero or negative size")) << out;
  EXPECT_TRUE(has_line(out, "eval_input (" + f.path("val.json") + "): 6 images checked: 1 missing, 2 undecodable, 1 decoded "
                            "with a warning, 1 size mismatches; boxes: 7 of 7 kept, 1 clipped, 0 dropped outside, 0 "
                            "degenerate (box_policy: clip); 4 problems stop training/evaluation (bad_images: stop)")) << out;
  EXPECT_TRUE(has_line(out, "check-data: 6 problems in 1 input (6 images); 4 would stop a run under the configured "
                            "policies")) << out;
  EXPECT_EQ(out.find(f.path("good.jpg") + ":"), std::string::npos) << out;
  // libjpeg's own words never reach the terminal.
  for (const char* raw : {"Premature end", "Corrupt JPEG data", "libpng", "imdecode"})
    EXPECT_EQ(out.find(raw), std::string::npos) << raw << "\n" << out;
}

TEST(CheckData, SkipPolicyAndACleanSetExitZero) {
  const BadFolder f;
  // Under bad_images: skip only the size mismatch (an annotation problem) still stops.
  detseg::testing::CommandRun r = run("check-data --config " + f.config + " --set eval_input.bad_images=skip");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("1 problem stops training/evaluation (bad_images: skip)"), std::string::npos) << r.output;
  write(f.dir / "clean.json",
        "{\"images\": [{\"id\": 1, \"file_name\": \"good.jpg\", \"width\": 64, \"height\": 48},"
        "{\"id\": 2, \"file_name\": \"turned.jpg\", \"width\": 48, \"height\": 64}], \"annotations\": [{\"id\": 1, "
        "\"image_id\": 1, \"category_id\": 1, \"bbox\": [4, 4, 20, 20], \"area\": 400, \"iscrowd\": 0}], "
        "\"categories\": [{\"id\": 1, \"name\": \"cell\"}]}");
  r = run("check-data --config " + f.config + " --set eval_input.annotations=" + f.path("clean.json"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has_line(r.output, "check-data: no problems in 1 input (2 images)")) << r.output;
  EXPECT_NE(r.output.find("0 size mismatches; boxes: 1 of 1 kept, 0 clipped, 0 dropped outside, 0 degenerate "
                          "(box_policy: clip); clean"),
            std::string::npos) << r.output;
  // Every input of the config: a second evaluation set is checked as well.
  r = run("check-data --config " + f.config + " --set eval_input.annotations=" + f.path("clean.json") +
          " --set eval_inputs.more.annotations=" + f.path("val.json") + " --set eval_inputs.more.images=" + f.dir.string());
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("eval_inputs.more (" + f.path("val.json") + "): 6 images checked"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("in 2 inputs (8 images)"), std::string::npos) << r.output;
}

// A bad evaluation image stops `detseg train` before its first step (it used to stop the run at
// its first periodic evaluation), naming the file.
TEST(CheckData, TrainStopsBeforeItsFirstStepOnABadEvaluationImage) {
  const BadFolder f;
  const std::string demo = std::string(DETSEG_SOURCE_DIR) + "/assets/demo";
  write(f.dir / "eval_cut.json",
        "{\"images\": [{\"id\": 1, \"file_name\": \"good.jpg\", \"width\": 64, \"height\": 48},"
        "{\"id\": 2, \"file_name\": \"cut.jpg\", \"width\": 64, \"height\": 48}], \"annotations\": [{\"id\": 1, "
        "\"image_id\": 1, \"category_id\": 1, \"bbox\": [4, 4, 20, 20], \"area\": 400, \"iscrowd\": 0}], "
        "\"categories\": [{\"id\": 1, \"name\": \"RBC\"}]}");
  const std::string config = (f.dir / "train.yaml").string();
  write(config, "model: {type: retinanet, num_classes: 3, backbone: resnet18, image_size: 128, fpn_channels: 32}\n"
                "train: {batch_size: 2, num_steps: 200, log_every: 1}\n"
                "train_input: {annotations: " + demo + "/train.json, images: " + demo + "/images, num_workers: 1}\n"
                "eval: {every_steps: 200}\n"
                "eval_input: {annotations: eval_cut.json, images: ., num_workers: 1}\n");
  const std::string model_dir = (f.dir / "run").string();
  const auto start = std::chrono::steady_clock::now();
  const detseg::testing::CommandRun r = run("train --config " + config + " --model-dir " + model_dir);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("detseg: error: " + f.path("cut.jpg") + ": cannot decode image (truncated JPEG"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(an evaluation image, found before training: the first evaluation would stop on it; "
                          "`detseg check-data --config " + config + "` lists every problem)"),
            std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step 1"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(model_dir + "/metrics.jsonl"));
  EXPECT_LT(seconds, 60.0);
  // With bad_images: skip the check lets it pass (the image is left out at evaluation instead).
  const detseg::testing::CommandRun skip = run("train --config " + config + " --model-dir " + model_dir +
                                               "2 --set train.num_steps=1 --set eval.every_steps=0 --set "
                                               "eval_input.bad_images=skip");
  EXPECT_EQ(skip.code, 0) << skip.output;
  EXPECT_NE(skip.output.find(f.path("cut.jpg") + ": cannot decode image"), std::string::npos) << skip.output;
  EXPECT_NE(skip.output.find("1 image was left out (bad_images: skip): " + f.path("cut.jpg")), std::string::npos)
      << skip.output;
}
