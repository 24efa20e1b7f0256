#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/json.h"

namespace fs = std::filesystem;

TEST(Files, AtomicWriteReplacesWholeFile) {
  fs::path dir = fs::temp_directory_path() / "detseg_test_files";
  fs::create_directories(dir);
  std::string path = (dir / "a.txt").string();
  detseg::write_file_atomic(path, "first");
  detseg::write_file_atomic(path, "second version");
  EXPECT_EQ(detseg::read_file(path), "second version");
  // No temp file is left behind.
  int entries = 0;
  for (auto& e : fs::directory_iterator(dir)) entries += e.path().filename() == "a.txt" ? 0 : 1;
  EXPECT_EQ(entries, 0);
}

TEST(Files, MissingFileNamesPath) {
  try {
    detseg::read_file("/nonexistent/x.json");
    FAIL();
  } catch (const detseg::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.json"), std::string::npos);
  }
}

TEST(Json, MalformedJsonGivesLineAndColumn) {
  std::string path = (fs::temp_directory_path() / "detseg_bad.json").string();
  detseg::write_file_atomic(path, "{\n  \"a\": 1,\n  \"b\": [1, 2,, 3]\n}\n");
  detseg::JsonDocument doc;
  try {
    detseg::load_json(path, doc);
    FAIL();
  } catch (const detseg::Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(path + ":3:14"), std::string::npos) << what;
  }
}

TEST(Json, LineColumn) {
  long line = 0, column = 0;
  detseg::line_column("ab\ncd\nef", 4, line, column);
  EXPECT_EQ(line, 2);
  EXPECT_EQ(column, 2);
}
