// Implements: `detseg predict`. Not built yet: the work lands with its issue.
#include "cli/commands.h"
#include "detseg/core/error.h"

namespace detseg::cli {

int run_predict(const PredictArgs& args) {
  throw Error("predict: not built yet");
}

}  // namespace detseg::cli
