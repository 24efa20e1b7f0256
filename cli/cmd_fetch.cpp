// Implements: `detseg fetch`: downloads pretrained weights into the weights cache (or verifies a
// local file) and prints the local path, the same step `detseg train` takes for model.pretrained.
// Torch-free: the front runs it in-process.
#include <cstdio>

#include "cli/commands.h"
#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/core/stop_signal.h"
#include "detseg/hub/weights_cache.h"

namespace detseg::cli {

int run_fetch(const FetchArgs& args) {
  install_stop_handlers();  // SIGINT/SIGTERM stop the download with its .part kept for resuming
  DETSEG_CONFIG_CHECK(args.source.empty() != args.config.empty(),
                      "fetch: give a URL (or path) or --config, one of the two");
  std::string path;
  if (!args.config.empty()) {
    DETSEG_CONFIG_CHECK(args.sha256.empty(), "fetch: --sha256 goes with a URL; with --config, the config's "
                                             "model.pretrained_sha256 applies");
    const PipelineConfig config = load_config(args.config, args.overrides);
    DETSEG_CONFIG_CHECK(!config.model.pretrained.empty(), args.config, ": model.pretrained is empty: nothing to fetch");
    path = fetch_weights(config.model.pretrained, config.model.pretrained_sha256, "model.pretrained",
                         "model.pretrained_sha256");
  } else {
    DETSEG_CONFIG_CHECK(args.overrides.empty(), "fetch: --set goes with --config");
    path = fetch_weights(args.source, args.sha256, "fetch", "fetch: --sha256");
  }
  std::printf("%s\n", path.c_str());
  return 0;
}

}  // namespace detseg::cli
