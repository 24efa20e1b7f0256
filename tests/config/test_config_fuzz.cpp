// Implements: regression tests for inputs the config fuzzer found (fuzz/fuzz_config_yaml.cpp; the
// reproducers are in fuzz/regressions/config_yaml/): each must end in a clean ConfigError.
#include <gtest/gtest.h>

#include "detseg/config/config.h"
#include "detseg/core/error.h"

using detseg::ConfigError;
using detseg::parse_config;

namespace {
std::string config_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(yaml, "configs/x.yaml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

// --set on a document that is a scalar threw yaml-cpp's BadSubscript past every handler (the CLI
// died on std::terminate). Reproducer: fuzz/regressions/config_yaml/set_on_a_scalar_top_level.
TEST(ConfigFuzz, SetOnAScalarDocument) {
  EXPECT_EQ(config_error("just a scalar", {"model.num_classes=3"}),
            "configs/x.yaml:1: expected a mapping of keys (model:, train:, ...) at the top level, got \"just a scalar\"");
}
