// Test helper: a fresh private directory for one test (mkdtemp under $TMPDIR, so two test runs at
// once never share files), removed when the test passed and kept, with its path in the failure
// output, when it failed.
#pragma once

#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace detseg::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& name) {
    std::string pattern = (std::filesystem::temp_directory_path() / ("detseg_" + name + "_XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    if (::testing::Test::HasFailure())
      std::fprintf(stderr, "kept the failed test's files in %s\n", path_.c_str());
    else
      std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& child) const { return path_ / child; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace detseg::testing
