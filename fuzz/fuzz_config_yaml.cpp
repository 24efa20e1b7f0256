// Harness: a pipeline config (YAML) with --set overrides through parse_config; a config that
// loads must also dump (config_to_yaml) to YAML that loads again and dumps the same way, as
// `detseg train` writes the resolved config that `detseg eval` reads back.
// Input: YAML[, separator, overrides, one "key.path=value" a line].
#include <sstream>

#include "detseg/config/config.h"
#include "fuzz_common.h"

using namespace detseg;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts = fuzz::split_parts(data, size);
  std::vector<std::string> overrides;
  for (size_t i = 1; i < parts.size(); ++i) {
    std::istringstream lines(parts[i]);
    for (std::string line; std::getline(lines, line);) overrides.push_back(line);
  }
  PipelineConfig config;
  try {
    // An absolute source: relative paths become absolute, so the dump reloads to the same paths.
    config = parse_config(parts[0], "/fuzz/config.yaml", overrides);
  } catch (const Error&) {
    return 0;
  }
  const std::string dumped = config_to_yaml(config);
  std::string again;
  try {
    again = config_to_yaml(parse_config(dumped, "/fuzz/resolved.yaml"));
  } catch (const Error& e) {
    fuzz::finding(std::string("the resolved config does not load again: ") + e.what() + "\n" + dumped);
  }
  // Overridden relative paths are anchored only by the second load; after it the dump is stable.
  try {
    if (config_to_yaml(parse_config(again, "/fuzz/resolved.yaml")) != again)
      fuzz::finding("dumping the resolved config is not stable:\n" + again);
  } catch (const Error& e) {
    fuzz::finding(std::string("the resolved config does not load a second time: ") + e.what());
  }
  return 0;
}
