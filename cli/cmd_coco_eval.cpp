// Implements: `detseg coco_eval`. Not built yet: the work lands with its issue.
#include "cli/commands.h"
#include "detseg/core/error.h"

namespace detseg::cli {

int run_coco_eval(const CocoEvalArgs& args) {
  throw Error("coco eval: not built yet");
}

}  // namespace detseg::cli
