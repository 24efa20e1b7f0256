// Where the tests and benchmarks find the sources, ../shared, the detseg binary and the peer Python.
// The values live in one file that CMake writes into the build folder (test_paths.cpp), not in -D
// flags: every other test object then compiles with the same command in any clone, so a fresh
// clone (CI's) reuses the compiler cache of an earlier build instead of recompiling ~120 files.
#pragma once

namespace detseg::test {
extern const char kSourceDir[];  // the repository root
extern const char kSharedDir[];  // ../shared next to it: reference data and results
extern const char kBinary[];     // the built `detseg` program
extern const char kPython[];     // the venv Python with torch and the peers (scripts/setup.sh)
}  // namespace detseg::test

#define DETSEG_SOURCE_DIR (::detseg::test::kSourceDir)
#define DETSEG_SHARED_DIR (::detseg::test::kSharedDir)
#define DETSEG_BINARY (::detseg::test::kBinary)
#define DETSEG_PYTHON (::detseg::test::kPython)
