// Implements: what the libFuzzer harnesses share: the rule for what counts as a finding, inputs
// split into parts, and scratch files for the readers that take paths.
//
// The rule: detseg::Error (and its ConfigError) is the clean answer to bad input, so a harness
// catches exactly that. Everything else is a finding that libFuzzer records with its input: a
// crash or sanitizer report, an allocation past -malloc_limit_mb (an absurd size taken from the
// file), a timeout, and any other exception type escaping (std::out_of_range from a std::stoll,
// YAML::Exception, std::bad_alloc, ...), which ends in std::terminate -> abort. A broken invariant
// (e.g. our own output does not read back) calls finding(), which aborts too.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "detseg/core/error.h"
#include "detseg/core/log.h"

namespace detseg::fuzz {

// Separates the parts of one input (GT from DT, YAML from its --set overrides, ...). Chosen to be
// unlikely inside any of the formats; the dictionaries list it so mutations can make and move it.
constexpr std::string_view kSeparator = "\n@@@@\n";

inline std::vector<std::string> split_parts(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t sep = all.find(kSeparator, start);
    if (sep == std::string_view::npos) {
      parts.emplace_back(all.substr(start));
      return parts;
    }
    parts.emplace_back(all.substr(start, sep - start));
    start = sep + kSeparator.size();
  }
}

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n", what.c_str());
  std::abort();
}

// Runs `body`; detseg's own errors are expected, everything else propagates (see above).
template <typename F>
void expect_clean(F&& body) {
  try {
    body();
  } catch (const Error&) {
  }
}

// A folder private to this process under $TMPDIR (scripts/fuzz.sh points it at /dev/shm when it
// can), removed at exit. The readers take paths, so each input is written there first.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("detseg_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return d;
  }();
  return dir;
}

inline std::string write_scratch(const std::string& name, const std::string& bytes) {
  const std::filesystem::path path = scratch_dir() / name;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) finding("cannot write scratch file " + path.string());
  return path.string();
}

// Quiet logging: a warning per input would drown libFuzzer's own lines.
inline void quiet() { set_log_level(LogLevel::kError); }

}  // namespace detseg::fuzz
