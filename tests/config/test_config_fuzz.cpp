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

// A key that is a list or mapping threw yaml-cpp's TypedBadConversion when the reader turned keys
// into names. Reproducers: fuzz/regressions/config_yaml/{list,mapping}_as_a_key.
TEST(ConfigFuzz, KeysThatAreNoNames) {
  EXPECT_EQ(config_error("[a, b]: 1\n"), "configs/x.yaml:1: the top level: expected key names, got a list as a key");
  EXPECT_EQ(config_error("? \xbf\x91:"), "configs/x.yaml:1: the top level: expected key names, got a mapping as a key");
  EXPECT_EQ(config_error("model:\n  num_classes: 3\n  {x: 1}: 2\n"),
            "configs/x.yaml:3: model: expected key names, got a mapping as a key");
}
