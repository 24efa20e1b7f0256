#include "detseg/engine/export.h"

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include "detseg/core/error.h"
#include "detseg/io/safetensors.h"
#include "detseg/models/build.h"
#include "detseg/train/checkpoint.h"

namespace detseg {

ExportResult export_model(const PipelineConfig& config, const ExportOptions& options) {
  DETSEG_CONFIG_CHECK(options.format == "safetensors", "export: --format ", options.format,
                      " is not available; safetensors is (TorchScript and ONNX are still to come)");
  DETSEG_CONFIG_CHECK(!options.output.empty(), "export: -o OUT is required");
  auto model = build_model(config);
  ExportResult result;
  result.step = load_weights_for_eval(options.checkpoint, *model);
  NamedTensors state = module_state(*model);
  for (auto& [name, tensor] : state) {
    tensor = tensor.detach().cpu().contiguous();
    ++result.num_tensors;
    result.num_values += tensor.numel();
  }
  // safetensors metadata is strings only; "format": "pt" is what the Python loaders expect.
  const nlohmann::json meta = nlohmann::json::parse(read_checkpoint_metadata(options.checkpoint), nullptr, false);
  std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                 {"detseg.model", config.model.type},
                                                 {"detseg.backbone", config.model.backbone},
                                                 {"detseg.step", std::to_string(result.step)}};
  if (meta.is_object() && meta.contains("class_names")) metadata["detseg.class_names"] = meta["class_names"].dump();
  if (meta.is_object() && meta.contains("category_ids")) metadata["detseg.category_ids"] = meta["category_ids"].dump();
  write_safetensors(options.output, state, metadata);
  return result;
}

}  // namespace detseg
