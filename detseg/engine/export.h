// Implements: `detseg export`, a trained checkpoint (its EMA averages when it has them) as a file
// other tools run or load, and the loading of such an exported model back into detseg.
//   torchscript: the network traced by LibTorch's C++ tracer, from normalised images [1, 3, H, W]
//     to its raw outputs (network_output_names), loadable by torch.jit.load and torch::jit::load.
//     Two-stage detectors add a method per later stage (box_head, mask_head) that takes the RoI
//     crops the caller cuts between the stages.
//     The file carries the resolved config and the class names (extra/detseg/config.yaml,
//     extra/detseg/meta.json), so `detseg predict` runs it without the config.
//   onnx: that TorchScript converted by torch.onnx (opset 17) in a Python with torch and onnx
//     ($DETSEG_PYTHON, else python3 on PATH), then checked by onnx.checker; a file per graph.
//   safetensors: the weights under torchvision's names for the architectures torchvision has
//     (RetinaNet, Faster/Mask R-CNN with ResNet + FPN: detseg's own; DeepLabv3: its head renamed
//     to DeepLabHead's), detseg's elsewhere.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "detseg/config/config.h"
#include "detseg/data/loader.h"
#include "detseg/models/model.h"

namespace detseg {

// The traced graph runs on the config's device (--device): its constants live there.
struct ExportOptions {
  std::string checkpoint;
  std::string format = "safetensors";  // torchscript | onnx | safetensors
  std::string output;
  // The traced input's height and width; 0: the model's (detectors: image_size, or max_dimension
  // rounded up to the size divisibility with keep_aspect; segmenters: the crop size).
  int64_t height = 0, width = 0;
};

struct ExportResult {
  int64_t step = 0;
  int64_t num_tensors = 0;
  int64_t num_values = 0;  // elements over every tensor
  int64_t height = 0, width = 0;  // traced input size (torchscript, onnx)
  std::vector<std::string> outputs;  // forward's output names (torchscript, onnx)
  // Later graphs, "name(inputs) -> outputs": methods of the TorchScript module, ONNX files of
  // their own (`files`, named after the output: model.box_head.onnx).
  std::vector<std::string> graphs;
  std::vector<std::string> files;
};

ExportResult export_model(const PipelineConfig& config, const ExportOptions& options);

// What an exported TorchScript file says about itself (from its extra/detseg/ files).
struct ExportedModelInfo {
  PipelineConfig config;
  int64_t height = 0, width = 0;  // the input size the graph was traced for
  int64_t step = 0;
  std::vector<std::string> outputs;
  std::vector<std::string> class_names;
  std::vector<int64_t> category_ids;
};

// Whether `path` is a TorchScript archive written by `detseg export` (a zip with extra/detseg/).
bool is_exported_model(const std::string& path);
ExportedModelInfo read_exported_model_info(const std::string& path);

// `predict`'s loader for an exported model, whose graph takes one traced-size image: detectors
// resize as their config says and pad to that size; segmenters are resized to it (their label
// maps go back to the original size as always).
void fit_loader_to_exported_model(LoaderOptions& loader, const ExportedModelInfo& info);

// Makes `model` (built from the exported config) run the exported network at `path` on `device`.
void use_exported_network(ModelImpl& model, const std::string& path, const at::Device& device);

}  // namespace detseg
