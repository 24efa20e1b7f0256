// Implements: `detseg check-data`: every input of the config (train_input, eval_input,
// eval_inputs.*) read once, every problem printed on its own line, a summary line per input, and
// the exit code: 1 when the config's policies would stop a run on a problem found, else 0.
#include "cli/commands.h"
#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/core/log.h"
#include "detseg/engine/check_data.h"

namespace detseg::cli {

int run_check_data(const CheckDataArgs& args) {
  const PipelineConfig config = load_config(args.config, args.overrides);
  const std::vector<InputCheck> checks = check_config_data(config);
  DETSEG_CONFIG_CHECK(!checks.empty(), args.config, ": no input has annotations (train_input, eval_input, eval_inputs)");
  int64_t problems = 0, stopping = 0, images = 0;
  for (const InputCheck& check : checks) {
    std::string text;
    for (const DataProblem& p : check.problems) text += p.line + "\n";
    print_output(text + check.summary() + "\n");
    problems += static_cast<int64_t>(check.problems.size());
    stopping += check.stopping();
    images += check.images;
  }
  const std::string inputs = str(checks.size(), checks.size() == 1 ? " input" : " inputs");
  if (problems == 0)
    print_output(str("check-data: no problems in ", inputs, " (", images, " images)\n"));
  else
    print_output(str("check-data: ", problems, problems == 1 ? " problem in " : " problems in ", inputs, " (", images, " images); ",
                     stopping == 0 ? std::string("none stops a run under the configured policies")
                                   : str(stopping, " would stop a run under the configured policies"),
                     "\n"));
  return stopping > 0 ? 1 : 0;
}

}  // namespace detseg::cli
