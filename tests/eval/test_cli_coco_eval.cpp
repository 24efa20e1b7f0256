// Implements: tests of `detseg coco-eval` run as a process (DETSEG_BINARY): the JSON it writes on
// case_small equals pycocotools' stats, and bad input gives clear messages and exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>

#include "detseg/core/files.h"
#include "detseg/core/json.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using namespace detseg;

namespace {

const std::string kCase = std::string(DETSEG_SHARED_DIR) + "/coco_cases/case_small/";

struct Outcome {
  int code;
  std::string out, err;
};

std::string temp_path(const std::string& name) {
  static const detseg::testing::TempDir dir_temp("test_cli_coco_eval");
  fs::path dir = dir_temp.path();
  fs::create_directories(dir);
  return (dir / name).string();
}

Outcome run(const std::string& args) {
  const std::string out = temp_path("stdout.txt"), err = temp_path("stderr.txt");
  const std::string cmd = std::string(DETSEG_BINARY) + " " + args + " > " + out + " 2> " + err;
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err)};
}

std::vector<double> numbers(simdjson::dom::element array) {
  std::vector<double> v;
  for (auto x : array.get_array()) v.push_back(double(x));
  return v;
}

}  // namespace

TEST(CliCocoEval, JsonStatsEqualPycocotools) {
  const std::string json = temp_path("small.json");
  Outcome r = run("coco-eval --gt " + kCase + "gt.json --dt " + kCase + "dt.json --per-class --json " + json);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(" Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.254"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-1 (no ground truth)"), std::string::npos) << r.out;  // category 11
  JsonDocument got, ref;
  load_json(json, got);
  load_json(kCase + "ref.json", ref);
  std::vector<double> stats = numbers(got.root["stats"]), expected = numbers(ref.root["stats"]);
  ASSERT_EQ(stats.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(stats[i], expected[i], 1e-12) << "stat " << i;
  for (auto field : ref.root["per_category_ap"].get_object())
    EXPECT_NEAR(double(got.root["per_category_ap"][field.key]), double(field.value), 1e-12) << field.key;
}

TEST(CliCocoEval, UnknownImageIdFailsNamingTheEntry) {
  const std::string dt = temp_path("unknown_image.json");
  write_file_atomic(dt, R"([{"image_id": 20953, "category_id": 2, "bbox": [1, 2, 3, 4], "score": 0.5},
                            {"image_id": 424242, "category_id": 2, "bbox": [1, 2, 3, 4], "score": 0.5}])");
  Outcome r = run("coco-eval --gt " + kCase + "gt.json --dt " + dt);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("unknown_image.json: [1].image_id: image 424242 is not in the ground truth"),
            std::string::npos) << r.err;
}

TEST(CliCocoEval, MalformedJsonGivesFileLineColumn) {
  const std::string dt = temp_path("malformed.json");
  write_file_atomic(dt, "[\n {\"image_id\": 20953, \"category_id\": 2,\n  \"bbox\": [1, 2, 3 4], \"score\": 0.5}]\n");
  Outcome r = run("coco-eval --gt " + kCase + "gt.json --dt " + dt);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("malformed.json:3:"), std::string::npos) << r.err;
}

TEST(CliCocoEval, NegativeBoxAndUsageErrors) {
  const std::string dt = temp_path("negative.json");
  write_file_atomic(dt, R"([{"image_id": 20953, "category_id": 2, "bbox": [1, 2, -3, 4], "score": 0.5}])");
  Outcome r = run("coco-eval --gt " + kCase + "gt.json --dt " + dt);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("[0].bbox: negative size"), std::string::npos) << r.err;
  // (Each run costs ~1-3 s of LibTorch start-up here, so flag-grammar errors, which main.cpp's
  // CLI11 handles, are not repeated.)
  Outcome missing = run("coco-eval --gt /nonexistent/gt.json --dt " + kCase + "dt.json");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/gt.json"), std::string::npos) << missing.err;
}

TEST(CliCocoEval, EmptyDetectionsFileIsNotAnError) {
  const std::string dt = temp_path("empty.json");
  write_file_atomic(dt, "[]");
  const std::string json = temp_path("empty_out.json");
  Outcome r = run("coco-eval --gt " + kCase + "gt.json --dt " + dt + " --json " + json);
  ASSERT_EQ(r.code, 0) << r.err;
  JsonDocument got;
  load_json(json, got);
  for (double s : numbers(got.root["stats"])) EXPECT_TRUE(s == 0 || s == -1) << s;
}

