#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/json.h"
#include "error_of.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

TEST(Files, AtomicWriteReplacesWholeFile) {
  const detseg::testing::TempDir dir_temp("test_files");
  fs::path dir = dir_temp.path();
  fs::create_directories(dir);
  std::string path = (dir / "a.txt").string();
  detseg::write_file_atomic(path, "first");
  detseg::write_file_atomic(path, "second version");
  EXPECT_EQ(detseg::read_file(path), "second version");
  // Without the fsyncs (coco-eval's metrics) the replacement is just as whole.
  detseg::write_file_atomic(path, "third", detseg::Durability::kAtomicOnly);
  EXPECT_EQ(detseg::read_file(path), "third");
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
  const detseg::testing::TempDir path_temp("bad");
  std::string path = (path_temp / "bad.json").string();
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

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("detseg_test_files_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

using detseg::testing::error_of;

}  // namespace

TEST(Files, FolderGivenAsFileIsNamed) {
  const fs::path dir = fresh_dir("folder");
  EXPECT_EQ(error_of([&] { detseg::read_file(dir.string()); }), dir.string() + ": is a folder, expected a file");
  detseg::JsonDocument doc;
  EXPECT_EQ(error_of([&] { detseg::load_json(dir.string(), doc); }),
            dir.string() + ": is a folder, expected a JSON file");
}

TEST(Json, TooDeepNestingNamesLineAndField) {
  const fs::path dir = fresh_dir("deep");
  const std::string path = (dir / "deep.json").string();
  // {"images": [{"x": [[[[...  1100 levels on line 2.
  detseg::write_file_atomic(path, "{\"images\": [{\"x\":\n" + std::string(1100, '[') + std::string(1100, ']') + "}]}");
  detseg::JsonDocument doc;
  const std::string what = error_of([&] { detseg::load_json(path, doc); });
  EXPECT_NE(what.find(path + ":2:"), std::string::npos) << what;
  EXPECT_NE(what.find("images[0].x[0]"), std::string::npos) << what;
  EXPECT_NE(what.find("nested deeper than 1024 levels"), std::string::npos) << what;
}

TEST(Json, HugeIntegerNamesLineAndField) {
  const fs::path dir = fresh_dir("bigint");
  const std::string path = (dir / "big.json").string();
  detseg::write_file_atomic(path, "{\"images\": [{\"id\": 1},\n  {\"id\": 123456789012345678901234}]}");
  detseg::JsonDocument doc;
  const std::string what = error_of([&] { detseg::load_json(path, doc); });
  EXPECT_EQ(what, path + ":2:10: images[1].id: integer 123456789012345678901234 does not fit in 64 bits");
  // The largest 64-bit values still read.
  detseg::write_file_atomic(path, "[18446744073709551615, -9223372036854775808]");
  EXPECT_EQ(error_of([&] { detseg::load_json(path, doc); }), "");
}

TEST(Json, Utf8Validation) {
  EXPECT_TRUE(detseg::is_valid_utf8("plain ascii"));
  EXPECT_TRUE(detseg::is_valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));  // é € 😀
  EXPECT_FALSE(detseg::is_valid_utf8("caf\xe9"));                                   // Latin-1 é
  EXPECT_FALSE(detseg::is_valid_utf8("\xc0\xaf"));                                  // overlong '/'
  EXPECT_FALSE(detseg::is_valid_utf8("\xed\xa0\x80"));                              // surrogate
  EXPECT_FALSE(detseg::is_valid_utf8("\xe2\x82"));                                  // truncated
  std::string out;
  EXPECT_TRUE(detseg::append_utf8(out, 0xE9));
  EXPECT_TRUE(detseg::append_utf8(out, 0x1F600));
  EXPECT_EQ(out, "\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_FALSE(detseg::append_utf8(out, 0xD800));
  EXPECT_FALSE(detseg::append_utf8(out, 0x110000));
}

TEST(Files, DirectoryLockRefusesASecondHolderAndNamesThePid) {
  const fs::path dir = fresh_dir("lock");
  {
    detseg::DirectoryLock first(dir.string(), "a test");
    // flock locks belong to the open file description: a second open in the same process conflicts
    // just as another process would.
    EXPECT_EQ(error_of([&] { detseg::DirectoryLock second(dir.string(), "another detseg train"); }),
              dir.string() + " is in use by another detseg train (pid " + std::to_string(::getpid()) +
                  "); wait for it to finish, stop it, or choose another --model-dir");
  }
  // Released with its holder: the lock file left behind does not block.
  EXPECT_EQ(error_of([&] { detseg::DirectoryLock again(dir.string(), "a test"); }), "");
}

TEST(Files, StaleTempFilesOfDeadWritersAreRemoved) {
  const fs::path dir = fresh_dir("stale");
  // A child that exits at once leaves a PID nobody holds (until reused, which takes a while).
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string mine = "ckpt-3.dsckpt.tmp." + std::to_string(::getpid());
  const std::string stale = "ckpt-4.dsckpt.tmp." + std::to_string(dead);
  for (const std::string& name : {mine, stale, std::string("notes.tmp.txt"), std::string("keep.json")})
    std::ofstream(dir / name) << "x";
  EXPECT_EQ(detseg::remove_stale_temp_files(dir.string()), 1);
  EXPECT_TRUE(fs::exists(dir / mine));
  EXPECT_FALSE(fs::exists(dir / stale));
  EXPECT_TRUE(fs::exists(dir / "notes.tmp.txt"));
  EXPECT_TRUE(fs::exists(dir / "keep.json"));
}
