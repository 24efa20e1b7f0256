// Implements: `detseg eval`. Not built yet: the work lands with its issue.
#include "cli/commands.h"
#include "detseg/core/error.h"

namespace detseg::cli {

int run_eval(const EvalArgs& args) {
  throw Error("eval: not built yet");
}

}  // namespace detseg::cli
