// Implements: `detseg convert_voc`. Not built yet: the work lands with its issue.
#include "cli/commands.h"
#include "detseg/core/error.h"

namespace detseg::cli {

int run_convert_voc(const ConvertVocArgs& args) {
  throw Error("convert voc: not built yet");
}

}  // namespace detseg::cli
