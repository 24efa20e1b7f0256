// Implements: `detseg train`. Not built yet: the work lands with its issue.
#include "cli/commands.h"
#include "detseg/core/error.h"

namespace detseg::cli {

int run_train(const TrainArgs& args) {
  throw Error("train: not built yet");
}

}  // namespace detseg::cli
