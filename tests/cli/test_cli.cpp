// The command-line contract: help for every subcommand, exit codes 0/1/2, config errors that name
// file, line and key.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "command_runner.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace fs = std::filesystem;

namespace {

using CliRun = detseg::testing::CommandRun;

// `env`: variable assignments put before the command, e.g. "DETSEG_ENGINE=/x".
CliRun run(const std::string& args, const std::string& env = "") {
  return detseg::testing::run_command(env + " " + std::string(DETSEG_BINARY) + " " + args);
}

std::string write_temp(const std::string& name, const std::string& text) {
  static const detseg::testing::TempDir path_temp("cli_test");
  fs::path path = path_temp.path();
  fs::create_directories(path);
  path /= name;
  std::ofstream(path) << text;
  return path.string();
}

}  // namespace

TEST(Cli, HelpForEverySubcommand) {
  for (const char* sub : {"train", "eval", "predict", "coco-eval", "convert", "convert voc", "info", "plot", "fetch"}) {
    CliRun r = run(std::string(sub) + " --help");
    EXPECT_EQ(r.code, 0) << sub << ": " << r.output;
    EXPECT_NE(r.output.find("Usage"), std::string::npos) << sub;
  }
  CliRun top = run("--help");
  EXPECT_EQ(top.code, 0);
  for (const char* sub : {"train", "eval", "predict", "coco-eval", "convert", "info", "fetch"})
    EXPECT_NE(top.output.find(sub), std::string::npos) << sub;
}

TEST(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(run("").code, 2);
  EXPECT_EQ(run("frobnicate").code, 2);
  EXPECT_EQ(run("train --model-dir x").code, 2);  // --config missing
  EXPECT_EQ(run("coco-eval --gt a.json --dt b.json --iou-type keypoints").code, 2);
}

TEST(Cli, ConfigErrorNamesFileLineAndKey) {
  std::string config = write_temp("bad.yaml", "model:\n  num_classes: 3\ntrain:\n  batch_size: four\n");
  const detseg::testing::TempDir model_dir("cli_x");
  CliRun r = run("train --config " + config + " --model-dir " + model_dir.str());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(config + ":4: train.batch_size: expected an integer in [1, 4096], got \"four\""),
            std::string::npos)
      << r.output;
  CliRun o = run("train --config " + config + " --model-dir x --set train.batch_size=2 --set model.focal_gama=2");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.output.find("model.focal_gama: unknown key"), std::string::npos) << o.output;
}

TEST(Cli, RuntimeFailureExitsOne) {
  std::string config = write_temp("ok.yaml", "model:\n  num_classes: 3\neval_input:\n  annotations: /nonexistent/val.json\n");
  CliRun r = run("eval --config " + config + " --checkpoint /nonexistent/ckpt.dsckpt");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/"), std::string::npos) << r.output;
}

TEST(Cli, InfoReportsThreadsAndConfigKeys) {
  CliRun r = run("--threads 2 info");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.output.find("threads 2"), std::string::npos) << r.output;
  CliRun keys = run("info --config-keys");
  EXPECT_EQ(keys.code, 0);
  EXPECT_NE(keys.output.find("`train.schedule.type`"), std::string::npos);
}

TEST(Cli, ConfigDocIsCurrent) {
  // docs/config.md embeds the generated key table; regenerate with scripts/gen_config_doc.sh.
  std::ifstream in(std::string(DETSEG_SOURCE_DIR) + "/docs/config.md");
  std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CliRun keys = run("info --config-keys");
  EXPECT_NE(doc.find(keys.output), std::string::npos) << "docs/config.md is stale: run scripts/gen_config_doc.sh";
}

// `detseg` is the torch-free front; torch subcommands are forwarded to detseg-engine (cli/front.cpp).
TEST(Cli, CocoEvalRunsWithoutTheEngineAndForwardingErrorsAreClear) {
  const std::string case_dir = std::string(DETSEG_SHARED_DIR) + "/coco_cases/case_small";
  if (!fs::exists(case_dir + "/gt.json")) GTEST_SKIP() << "no " << case_dir;
  const std::string no_engine = "DETSEG_ENGINE=/nonexistent/detseg-engine";
  const std::string args = "coco-eval --gt " + case_dir + "/gt.json --dt " + case_dir + "/dt.json";
  // With the engine pointed at nothing, coco-eval still works: it never loads LibTorch.
  CliRun eval = run(args);
  CliRun eval_no_engine = run(args, no_engine);
  ASSERT_EQ(eval.code, 0) << eval.output;
  ASSERT_EQ(eval_no_engine.code, 0) << eval_no_engine.output;
  const size_t summary = eval.output.find("Average Precision");
  ASSERT_NE(summary, std::string::npos) << eval.output;
  EXPECT_EQ(eval_no_engine.output.substr(eval_no_engine.output.find("Average Precision")), eval.output.substr(summary));
  // A forwarded subcommand with a missing engine fails with exit 1 and names the engine path.
  CliRun info_no_engine = run("info", no_engine);
  EXPECT_EQ(info_no_engine.code, 1) << info_no_engine.output;
  EXPECT_NE(info_no_engine.output.find("/nonexistent/detseg-engine"), std::string::npos) << info_no_engine.output;
  // The engine gets the arguments unchanged, and a waiting policy chosen from the load (a spin on
  // free cores, sleeping on shared ones: tests/core/test_openmp_wait.cpp) unless the user chose one.
  const std::string fake_engine = write_temp(
      "fake-engine.sh", "#!/bin/sh\necho \"args=$* omp=$OMP_WAIT_POLICY spin=$GOMP_SPINCOUNT\"\n");
  fs::permissions(fake_engine, fs::perms::owner_all);
  CliRun forwarded = run("--threads 1 info", "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT DETSEG_ENGINE=" + fake_engine);
  EXPECT_TRUE(forwarded.output.find("args=--threads 1 info omp= spin=10000\n") != std::string::npos ||
              forwarded.output.find("args=--threads 1 info omp=passive spin=\n") != std::string::npos)
      << forwarded.output;
  forwarded = run("info", "OMP_WAIT_POLICY=active DETSEG_ENGINE=" + fake_engine);
  EXPECT_NE(forwarded.output.find("omp=active spin=\n"), std::string::npos) << forwarded.output;
  // The front loads neither LibTorch nor libcurl (opened only by a download, hub/download.cpp):
  // ld.so's trace of what the process maps, the list ldd prints (with libstdc++ linked statically,
  // as CMake does where libyaml-cpp.a exists, libc and libm are all it names).
  CliRun loaded = run("--version", "LD_TRACE_LOADED_OBJECTS=1");
  EXPECT_NE(loaded.output.find("libc.so"), std::string::npos) << loaded.output;
  EXPECT_EQ(loaded.output.find("libtorch"), std::string::npos) << loaded.output;
  EXPECT_EQ(loaded.output.find("libcurl"), std::string::npos) << loaded.output;
  // Forwarded normally, `info` reaches LibTorch.
  CliRun info = run("info");
  EXPECT_EQ(info.code, 0) << info.output;
  EXPECT_NE(info.output.find("torch "), std::string::npos) << info.output;
  // It says how OpenMP waits, and why: the front's choice from the load, or the user's setting.
  info = run("info", "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT");
  EXPECT_TRUE(info.output.find("\nopenmp waiting GOMP_SPINCOUNT=10000 (chosen from the load at start: ") !=
                  std::string::npos ||
              info.output.find("\nopenmp waiting OMP_WAIT_POLICY=passive (chosen from the load at start: ") !=
                  std::string::npos)
      << info.output;
  info = run("info", "env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=active");
  EXPECT_NE(info.output.find("\nopenmp waiting OMP_WAIT_POLICY=active (set in the environment)\n"), std::string::npos)
      << info.output;
  // And malloc's setting (detseg/core/malloc_reuse.h): the engine's own, or the user's tunables.
  info = run("info", "env -u GLIBC_TUNABLES -u MALLOC_MMAP_THRESHOLD_ -u MALLOC_TRIM_THRESHOLD_");
  EXPECT_NE(info.output.find("\nmalloc freed memory kept for reuse (mmap threshold 32 MiB, trim threshold 1 GiB)\n"),
            std::string::npos)
      << info.output;
  info = run("info", "GLIBC_TUNABLES=glibc.malloc.trim_threshold=131072");
  EXPECT_NE(info.output.find("\nmalloc as set in the environment\n"), std::string::npos) << info.output;
}

TEST(Cli, PlotExitCodesAndOutput) {
  const detseg::testing::TempDir dir_temp("cli_plot");
  const fs::path dir = dir_temp.path();
  fs::remove_all(dir);
  fs::create_directories(dir / "run");
  // No such folder: a usage error.
  CliRun missing = run("plot " + (dir / "nope").string());
  EXPECT_EQ(missing.code, 2) << missing.output;
  EXPECT_NE(missing.output.find("run directory not found"), std::string::npos) << missing.output;
  // A folder without logs, or with a malformed line: runtime failures naming the file (and line).
  CliRun empty = run("plot " + (dir / "run").string());
  EXPECT_EQ(empty.code, 1) << empty.output;
  EXPECT_NE(empty.output.find((dir / "run" / "metrics.jsonl").string()), std::string::npos) << empty.output;
  std::ofstream(dir / "run" / "metrics.jsonl") << "{\"step\": 5, \"split\": \"train\", \"total_loss\": 1.5, "
                                                  "\"learning_rate\": 0.01}\n"
                                                  "not json\n";
  CliRun bad = run("plot " + (dir / "run").string());
  EXPECT_EQ(bad.code, 1) << bad.output;
  EXPECT_NE(bad.output.find((dir / "run" / "metrics.jsonl").string() + ":2:"), std::string::npos) << bad.output;
  std::ofstream(dir / "run" / "metrics.jsonl") << "{\"step\": 5, \"split\": \"train\", \"total_loss\": 1.5, "
                                                  "\"learning_rate\": 0.01}\n"
                                                  "{\"step\": 10, \"split\": \"train\", \"total_loss\": 1.0, "
                                                  "\"learning_rate\": 0.02}\n";
  CliRun ok = run("plot " + (dir / "run").string() + " --out " + (dir / "charts").string() + " --width 400 --height 300");
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_TRUE(fs::exists(dir / "charts" / "loss.png")) << ok.output;
  EXPECT_TRUE(fs::exists(dir / "charts" / "learning_rate.png")) << ok.output;
  EXPECT_FALSE(fs::exists(dir / "charts" / "eval_ap.png"));  // no evaluations logged
  fs::remove_all(dir);
}

TEST(Cli, InfoResolvedPrintsTheMergedConfig) {
  const fs::path dir = fs::temp_directory_path() / ("detseg_test_cli_resolved_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "child.yaml") << "_base_: " << DETSEG_SOURCE_DIR
                                    << "/configs/demo/retinanet_r18_bccd.yaml\nmodel: {image_size: 320}\n";
  CliRun r = run("info --config " + (dir / "child.yaml").string() + " --resolved --set train.num_steps=9");
  ASSERT_EQ(r.code, 0) << r.output;
  // The child's value, the --set, and the base's own keys (its backbone) all in one resolved YAML.
  EXPECT_NE(r.output.find("image_size: 320"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("num_steps: 9"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("backbone: \"resnet18\""), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("_base_"), std::string::npos) << r.output;
  r = run("info --resolved");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("info: --resolved and --config go together"), std::string::npos) << r.output;
  fs::remove_all(dir);
}

// Hostile YAML ends at once in one line (exit 2): a 306-byte alias bomb ("billion laughs": 9^9
// nodes once expanded) ran for hours and a 50 MB list took 4.4 GB before the bounds.
TEST(Cli, YamlAliasBombAndOversizedConfigAreRefusedInOneLine) {
  std::string bomb = "a: &a [x,x,x,x,x,x,x,x,x]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int k = 0; k < 9; ++k) bomb += std::string(k ? "," : "") + "*" + static_cast<char>(c - 1);
    bomb += "]\n";
  }
  const std::string path = write_temp("bomb.yaml", bomb);
  auto t0 = std::chrono::steady_clock::now();
  CliRun r = run("info --config " + path + " --resolved");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(r.output, "detseg: error: " + path + ": YAML aliases expand to more than 1000000 nodes (an alias bomb?)\n");
  EXPECT_LT(seconds, 2.0);
  // The same value through --set names the --set.
  r = run("info --config " + std::string(DETSEG_SOURCE_DIR) +
          "/configs/demo/retinanet_r18_bccd.yaml --resolved --set 'model.pixel_mean=[&a [1,1,1,1,1,1,1,1,1], "
          "&b [*a,*a,*a,*a,*a,*a,*a,*a,*a], &c [*b,*b,*b,*b,*b,*b,*b,*b,*b], &d [*c,*c,*c,*c,*c,*c,*c,*c,*c], "
          "&e [*d,*d,*d,*d,*d,*d,*d,*d,*d], &f [*e,*e,*e,*e,*e,*e,*e,*e,*e], &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]]'");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(r.output.rfind("detseg: error: --set model.pixel_mean=[&a [1,", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("]: YAML aliases expand to more than 1000000 nodes (an alias bomb?)\n"), std::string::npos)
      << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  // A config file over 1 MiB is refused unread.
  const std::string big = write_temp("big.yaml", "model: {num_classes: 3}\n# " + std::string(1 << 20, 'x') + "\n");
  t0 = std::chrono::steady_clock::now();
  r = run("info --config " + big + " --resolved");
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(r.output, "detseg: error: " + big + ": " + std::to_string(fs::file_size(big)) +
                          " bytes, more than the 1 MiB (1048576 bytes) detseg reads from a YAML file\n");
  EXPECT_LT(seconds, 2.0);
}

// A bad --set value is blamed on that --set, whole, not on the config file.
TEST(Cli, SetErrorsNameTheSet) {
  const std::string demo = std::string(DETSEG_SOURCE_DIR) + "/configs/demo/retinanet_r18_bccd.yaml";
  CliRun r = run("info --config " + demo + " --resolved --set train.batch_size=four");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(r.output,
            "detseg: error: --set train.batch_size=four: train.batch_size: expected an integer in [1, 4096], got \"four\"\n");
  r = run("info --config " + demo + " --resolved --set model.min_dimension=999");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(r.output, "detseg: error: --set model.min_dimension=999: model.min_dimension (999) must not exceed "
                      "model.max_dimension (352)\n");
}
