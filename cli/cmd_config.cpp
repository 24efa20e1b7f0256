// Implements: the torch-free half of `detseg info`: --config-keys (the key reference) and
// --config C --resolved (the merged, defaulted config). Both binaries run it in-process.
#include <cstdio>

#include "cli/commands.h"
#include "detseg/config/config.h"
#include "detseg/core/error.h"

namespace detseg::cli {

bool run_config_info(const InfoArgs& args) {
  if (args.config_keys) {
    std::printf("%s", config_reference_markdown().c_str());
    return true;
  }
  if (!args.resolved && args.config.empty()) return false;
  DETSEG_CONFIG_CHECK(args.resolved && !args.config.empty(), "info: --resolved and --config go together");
  std::printf("%s", config_to_yaml(load_config(args.config, args.overrides)).c_str());
  return true;
}

}  // namespace detseg::cli
