// Implements: a regression test for read_file on files that cannot seek, met while fuzzing the
// config's _base_ paths (fuzz/fuzz_config_yaml.cpp; reproducer fuzz/regressions/config_yaml/).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"

using namespace detseg;
namespace fs = std::filesystem;

// A /proc file or a pipe reports no size: read_file took -1 as the size and threw std::length_error
// (`detseg coco-eval --gt <(zcat gt.json.gz)`, or a config whose _base_ names such a file).
TEST(FilesFuzz, FilesWithoutASizeAreReadToTheEnd) {
  EXPECT_NE(read_file("/proc/self/status").find("Name:"), std::string::npos);
  const fs::path fifo = fs::temp_directory_path() / ("detseg_test_files_fuzz_" + std::to_string(::getpid()));
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(fifo) << "from a pipe\n"; });
  const std::string got = read_file(fifo.string());
  writer.join();
  fs::remove(fifo);
  EXPECT_EQ(got, "from a pipe\n");
  try {
    parse_config("_base_: /proc/self/status\nmodel:\n  num_classes: 3\n", "/fuzz/x.yaml");
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/self/status"), std::string::npos) << e.what();
  }
}
