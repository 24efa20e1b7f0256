#include "detseg/engine/export.h"

#include <caffe2/serialize/inline_container.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <functional>
#include <map>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/log.h"
#include "detseg/core/subprocess.h"
#include "detseg/engine/device.h"
#include "detseg/engine/memory.h"
#include "detseg/io/safetensors.h"
#include "detseg/models/build.h"
#include "detseg/train/checkpoint.h"

namespace detseg {
namespace fs = std::filesystem;

namespace {

constexpr const char* kConfigFile = "detseg/config.yaml";
constexpr const char* kMetaFile = "detseg/meta.json";
// The largest traced side: model.max_dimension's limit, the longest side detseg resizes an image to.
// Beyond it the input alone, and the anchors of a detector, run to tens of gigabytes (100000 x
// 100000 pixels: 120 GB of input) before the trace begins.
constexpr int64_t kMaxTracedSide = 8192;

std::string joined(const std::vector<std::string>& names, const std::string& separator) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : separator) + n;
  return out;
}

nlohmann::json checkpoint_meta(const std::string& checkpoint) {
  nlohmann::json meta = nlohmann::json::parse(read_checkpoint_metadata(checkpoint), nullptr, false);
  return meta.is_object() ? meta : nlohmann::json::object();
}

ExportResult export_safetensors(const PipelineConfig& config, const ExportOptions& options) {
  auto model = build_model(config);
  ExportResult result;
  result.step = load_weights_for_eval(options.checkpoint, *model);
  NamedTensors state = module_state(*model);
  for (auto& [name, tensor] : state) {
    name = model->torchvision_name(name);
    tensor = tensor.detach().cpu().contiguous();
    ++result.num_tensors;
    result.num_values += tensor.numel();
  }
  // safetensors metadata is strings only; "format": "pt" is what the Python loaders expect.
  const nlohmann::json meta = checkpoint_meta(options.checkpoint);
  std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                 {"detseg.model", config.model.type},
                                                 {"detseg.backbone", config.model.backbone},
                                                 {"detseg.step", std::to_string(result.step)}};
  if (meta.contains("class_names")) metadata["detseg.class_names"] = meta["class_names"].dump();
  if (meta.contains("category_ids")) metadata["detseg.category_ids"] = meta["category_ids"].dump();
  write_safetensors(options.output, state, metadata);
  return result;
}

// The traced input size: what the user asked for, else the one size every image of this config
// fits (detectors: the square they are fitted into; segmenters: the crop size).
std::pair<int64_t, int64_t> traced_size(const PipelineConfig& config, const ModelImpl& model,
                                        const ExportOptions& options) {
  const bool segmenter = is_segmentation_model(config);
  int64_t h = options.height, w = options.width;
  if (h == 0 && w == 0) {
    h = w = model.input_size();
    if (!segmenter && config.model.resizer == "keep_aspect") {
      const int64_t d = keep_aspect_size_divisibility(config.model);
      h = w = (config.model.max_dimension + d - 1) / d * d;
    }
  }
  DETSEG_CONFIG_CHECK(h > 0 && w > 0, "export: --height and --width must both be given (or neither), got ", h, "x", w);
  if (!segmenter && config.model.resizer == "fixed")
    DETSEG_CONFIG_CHECK(h == model.input_size() && w == h, "export: ", config.model.type, " with model.resizer fixed takes ",
                        model.input_size(), "x", model.input_size(), " images (model.image_size), not ", h, "x", w);
  if (!segmenter && config.model.resizer == "keep_aspect") {
    const int64_t d = keep_aspect_size_divisibility(config.model);
    DETSEG_CONFIG_CHECK(h % d == 0 && w % d == 0, "export: with model.resizer keep_aspect the input's height and "
                        "width are multiples of ", d, " (the coarsest stride); got ", h, "x", w);
  }
  return {h, w};
}

// `model`'s parameters and buffers as attributes of a TorchScript module, the same tensors, so the
// tracer records reads of them as attribute reads instead of baking them in as constants.
// TorchScript attribute names cannot hold dots: backbone.body.conv1.weight -> backbone_body_conv1_weight.
torch::jit::Module module_holding(const torch::nn::Module& model, const std::string& type_name) {
  torch::jit::Module module(c10::QualifiedName("__torch__.detseg." + type_name));
  module.register_attribute("training", c10::BoolType::get(), false);  // what Python's nn.Module has
  auto jit_name = [](std::string name) {
    std::replace(name.begin(), name.end(), '.', '_');
    return name;
  };
  for (const auto& p : model.named_parameters(true))
    if (p.value().defined()) module.register_parameter(jit_name(p.key()), p.value(), /*is_buffer=*/false);
  for (const auto& b : model.named_buffers(true))
    if (b.value().defined()) module.register_buffer(jit_name(b.key()), b.value());
  return module;
}

// Traces `fn` on `example` as method `method` of `module` (whose attributes hold the weights).
void add_traced_method(torch::jit::Module& module, const std::string& method, const std::vector<at::Tensor>& example,
                       const std::vector<std::string>& input_names,
                       const std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>& fn) {
  auto run = [&](torch::jit::Stack inputs) -> torch::jit::Stack {
    std::vector<at::Tensor> tensors;
    for (const c10::IValue& v : inputs) tensors.push_back(v.toTensor());
    std::vector<c10::IValue> outputs;
    for (const at::Tensor& t : fn(tensors)) outputs.emplace_back(t);
    return {c10::ivalue::Tuple::create(std::move(outputs))};
  };
  torch::jit::Stack inputs(example.begin(), example.end());
  auto no_names = [](const at::Tensor&) { return std::string(); };
  auto traced = torch::jit::tracer::trace(std::move(inputs), run, no_names, /*strict=*/false, /*force_outplace=*/true,
                                          &module, input_names);
  auto function = module._ivalue()->compilation_unit()->create_function(
      c10::QualifiedName(*module.type()->name(), method), traced.first->graph);
  module.type()->addMethod(function);
}

// What the export traces: forward's example images and, per later graph, its example inputs.
struct TraceExamples {
  at::Tensor images;
  std::map<std::string, std::vector<at::Tensor>> graphs;
};

TraceExamples trace_examples(ModelImpl& model, const at::Tensor& images) {
  TraceExamples examples{images, {}};
  if (model.network_graphs().empty()) return examples;
  const std::vector<at::Tensor> forward_outputs = model.network_outputs(images);
  for (const auto& graph : model.network_graphs())
    examples.graphs[graph.name] = model.network_graph_example(graph.name, forward_outputs);
  return examples;
}

// A TorchScript module of `model`'s network: forward and every later graph as methods, or (`only`
// set) that one graph alone as forward (what the ONNX converter takes, a file per graph).
torch::jit::Module trace_network(ModelImpl& model, const std::string& type_name, const TraceExamples& examples,
                                 const std::string& only = "") {
  torch::jit::Module module = module_holding(model, type_name);
  if (only.empty() || only == "forward") {
    // The constants (anchors) become buffers of the module, so that the graph can return them: the
    // tracer refuses outputs that are not attributes or computed from the input.
    std::vector<at::Tensor> constants;
    for (auto& [name, tensor] :
         model.network_constants(examples.images.size(2), examples.images.size(3), examples.images.device())) {
      module.register_buffer(name, tensor);
      constants.push_back(tensor);
    }
    add_traced_method(module, "forward", {examples.images}, {"images"}, [&](const std::vector<at::Tensor>& in) {
      std::vector<at::Tensor> out = model.network_outputs(in.at(0));
      out.insert(out.end(), constants.begin(), constants.end());
      return out;
    });
  }
  for (const auto& graph : model.network_graphs()) {
    if (!only.empty() && only != graph.name) continue;
    add_traced_method(module, only.empty() ? graph.name : "forward", examples.graphs.at(graph.name), graph.input_names,
                      [&](const std::vector<at::Tensor>& in) { return model.run_network_graph(graph.name, in); });
  }
  return module;
}

// What an export reads, which its outputs must not replace.
std::vector<CommandInput> export_inputs(const PipelineConfig& config, const ExportOptions& options) {
  std::vector<CommandInput> inputs = {{options.checkpoint, "the checkpoint given by --checkpoint"}};
  for (const std::string& file : config.files)
    inputs.push_back({file, file == config.source ? "the config given by --config" : "a _base_ file of the config"});
  return inputs;
}

// The ONNX file of a later graph: model.onnx -> model.box_head.onnx, next to it.
std::string graph_file(const std::string& output, const std::string& graph) {
  fs::path p(output);
  const std::string ext = p.extension().string();
  return (p.parent_path() / (p.stem().string() + "." + graph + (ext.empty() ? ".onnx" : ext))).string();
}

// $DETSEG_PYTHON, else the Python this build was configured with (scripts/setup.sh's venv, which has
// torch and onnx) while it exists, else python3 on PATH.
std::string python_for_onnx() {
  if (const char* p = std::getenv("DETSEG_PYTHON"); p && *p) return p;
#ifdef DETSEG_BUILD_PYTHON
  if (std::error_code ec; fs::exists(DETSEG_BUILD_PYTHON, ec)) return DETSEG_BUILD_PYTHON;
#endif
  return "python3";
}

// torch.onnx's TorchScript converter (dynamo=False: the input is a traced graph, not Python code),
// then onnx's own checker, for each job: a TorchScript file whose forward is one graph. Prints one
// line on failure; exit 3 when a package is missing.
constexpr const char* kOnnxScript = R"PY(
import json, sys, warnings
try:
    import torch, onnx
except ImportError as e:
    print("missing Python package:", e.name); sys.exit(3)
warnings.filterwarnings("ignore")
try:
    for job in json.loads(sys.argv[1]):
        m = torch.jit.load(job["src"], map_location="cpu")
        names = [name for name, _ in job["inputs"]]
        axes = {n: {0: "regions"} for n in names + job["outputs"]} if job["regions"] else None
        torch.onnx.export(m, tuple(torch.zeros(*shape) for _, shape in job["inputs"]), job["dst"], opset_version=17,
                          dynamo=False, input_names=names, output_names=job["outputs"], dynamic_axes=axes)
        onnx.checker.check_model(onnx.load(job["dst"]), full_check=True)
except Exception as e:
    print(type(e).__name__ + ": " + str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__); sys.exit(1)
)PY";

void run_onnx_conversion(const nlohmann::json& jobs, const std::string& output) {
  const std::string python = python_for_onnx();
  const ProcessResult p = run_process({python, "-c", kOnnxScript, jobs.dump()});
  std::string last_line = p.output;
  while (!last_line.empty() && last_line.back() == '\n') last_line.pop_back();
  if (const size_t nl = last_line.rfind('\n'); nl != std::string::npos) last_line = last_line.substr(nl + 1);
  DETSEG_CHECK(p.status != 127, "export --format onnx: cannot run ", python, "; it converts with torch.onnx: set "
               "DETSEG_PYTHON to a Python with torch and onnx (pip install torch==2.11.0 onnx)");
  DETSEG_CHECK(p.status != 3, "export --format onnx: ", python, " lacks a package (", last_line, "); pip install "
               "torch==2.11.0 onnx into it, or set DETSEG_PYTHON to a Python that has them");
  DETSEG_CHECK(p.status == 0, "export --format onnx: torch.onnx could not convert ", output, ": ", last_line);
}

nlohmann::json shape_of(const at::Tensor& t) { return t.sizes().vec(); }

ExportResult export_traced(const PipelineConfig& config, const ExportOptions& options) {
  torch::NoGradGuard no_grad;
  const at::Device device = resolve_device(config.device);
  auto model = build_model(config);
  DETSEG_CONFIG_CHECK(!model->network_output_names().empty(), "export --format ", options.format, ": ",
                      config.model.type, " cannot be traced; --format safetensors exports its weights");
  model->to(device);
  ExportResult result;
  result.step = load_weights_for_eval(options.checkpoint, *model);
  model->eval();
  std::tie(result.height, result.width) = traced_size(config, *model, options);
  result.outputs = model->network_output_names();
  for (const auto& constant : model->network_constants(result.height, result.width, device))
    result.outputs.push_back(constant.first);
  for (const auto& p : model->named_parameters(true)) {
    p.value().requires_grad_(false);  // an inference graph: Python callers need no torch.no_grad()
    ++result.num_tensors;
    result.num_values += p.value().numel();
  }

  // Normalised pixels, like the loader's output: forward's shapes are fixed by this example.
  TraceExamples examples;
  try {
    examples = trace_examples(*model, at::randn({1, 3, result.height, result.width}, at::TensorOptions(device)));
  } catch (const std::exception& e) {
    rethrow_if_out_of_memory(e, str("export: running ", config.model.type, " on a ", result.height, "x", result.width,
                                    " input to trace it"));
    throw;
  }
  const std::string type_name = is_segmentation_model(config) ? "Segmenter" : "Detector";

  nlohmann::json meta = checkpoint_meta(options.checkpoint);
  nlohmann::json info = {{"format", "detseg-torchscript"}, {"detseg", DETSEG_VERSION}, {"model", config.model.type},
                         {"step", result.step}, {"input", {1, 3, result.height, result.width}},
                         {"input_name", "images"}, {"outputs", result.outputs},
                         {"pixel_mean", config.model.pixel_mean}, {"pixel_std", config.model.pixel_std}};
  // Later graphs: their inputs' shapes with the region count free (-1).
  nlohmann::json graphs = nlohmann::json::array();
  for (const auto& g : model->network_graphs()) {
    nlohmann::json inputs = nlohmann::json::array();
    for (size_t i = 0; i < g.input_names.size(); ++i) {
      nlohmann::json shape = shape_of(examples.graphs.at(g.name).at(i));
      shape[0] = -1;
      inputs.push_back({{"name", g.input_names[i]}, {"shape", shape}});
    }
    graphs.push_back({{"name", g.name}, {"inputs", inputs}, {"outputs", g.output_names}});
    result.graphs.push_back(g.name + "(" + joined(g.input_names, ", ") + ") -> " + joined(g.output_names, ", "));
  }
  if (!graphs.empty()) info["graphs"] = graphs;
  for (const char* key : {"class_names", "category_ids"})
    if (meta.contains(key)) info[key] = meta[key];
  // Data paths absolute: the embedded config is read from wherever the model goes (predict takes
  // the data set's image ids from eval_input's annotations when that file is there).
  PipelineConfig embedded = config;
  auto absolute = [](std::string& path) {
    if (!path.empty()) path = fs::absolute(path).lexically_normal().string();
  };
  for (InputConfig* input : {&embedded.train_input, &embedded.eval_input}) {
    absolute(input->annotations);
    absolute(input->images);
    absolute(input->label_map);
  }
  for (auto& named : embedded.eval_inputs) {
    absolute(named.second.annotations);
    absolute(named.second.images);
    absolute(named.second.label_map);
  }
  const torch::jit::ExtraFilesMap extra = {{kConfigFile, config_to_yaml(embedded)}, {kMetaFile, info.dump(1) + "\n"}};

  // Written in a private folder next to the output, then renamed into place: a stopped export
  // leaves no half file. (The archive's inner folder is named after the file, so the name is kept.)
  const fs::path out(options.output);
  const fs::path temp_dir = out.parent_path() / (".detseg-export-" + std::to_string(::getpid()));
  make_directories(temp_dir.string());
  std::vector<std::pair<fs::path, fs::path>> renames;  // temp -> final, forward's file last
  try {
    if (options.format == "torchscript") {
      const fs::path temp = (temp_dir / out.filename()).replace_extension(".pt");
      try {
        trace_network(*model, type_name, examples).save(temp.string(), extra);
      } catch (const std::exception& e) {
        rethrow_if_out_of_memory(e, str("export: tracing ", config.model.type, " at ", result.height, "x", result.width));
        throw;
      }
      renames.emplace_back(temp, out);
    } else {
      // ONNX: one file per graph; forward's carries the model's own name.
      nlohmann::json jobs = nlohmann::json::array();
      auto add_job = [&](const std::string& graph, const std::vector<std::string>& input_names,
                         const std::vector<at::Tensor>& example, const std::vector<std::string>& outputs) {
        const fs::path src = temp_dir / (graph + ".pt");
        const fs::path final_path = graph == "forward" ? out : fs::path(graph_file(options.output, graph));
        check_output_is_not_an_input(final_path.string(), "export: -o", export_inputs(config, options));
        const fs::path dst = temp_dir / final_path.filename();
        trace_network(*model, type_name, examples, graph).save(src.string(), extra);
        nlohmann::json inputs = nlohmann::json::array();
        for (size_t i = 0; i < input_names.size(); ++i) inputs.push_back({input_names[i], shape_of(example[i])});
        jobs.push_back({{"src", src.string()}, {"dst", dst.string()}, {"inputs", inputs}, {"outputs", outputs},
                        {"regions", graph != "forward"}});
        renames.emplace(graph == "forward" ? renames.end() : renames.begin(), dst, final_path);
      };
      add_job("forward", {"images"}, {examples.images}, result.outputs);
      for (const auto& g : model->network_graphs()) {
        add_job(g.name, g.input_names, examples.graphs.at(g.name), g.output_names);
        result.files.push_back(graph_file(options.output, g.name));
      }
      run_onnx_conversion(jobs, options.output);
    }
    for (const auto& [from, to] : renames) {
      std::error_code error;
      fs::rename(from, to, error);
      DETSEG_CHECK(!error, to.string(), ": cannot write the exported model: ", error.message());
    }
  } catch (...) {
    std::error_code ec;
    fs::remove_all(temp_dir, ec);
    throw;
  }
  fs::remove_all(temp_dir);
  return result;
}

}  // namespace

ExportResult export_model(const PipelineConfig& config, const ExportOptions& options) {
  DETSEG_CONFIG_CHECK(!options.output.empty(), "export: -o OUT is required");
  DETSEG_CONFIG_CHECK(!is_directory(options.output), "export: -o ", options.output,
                      ": is a folder; give a file path (e.g. ", (fs::path(options.output) / "model.pt").string(), ")");
  const fs::path parent = fs::path(options.output).parent_path();
  DETSEG_CONFIG_CHECK(parent.empty() || is_directory(parent.string()), "export: -o ", options.output, ": the folder ",
                      parent.string(), " does not exist");
  check_output_is_not_an_input(options.output, "export: -o", export_inputs(config, options));
  {
    const int64_t h = options.height > 0 ? options.height : options.width, w = options.width > 0 ? options.width : h;
    for (const auto& [flag, side] : {std::pair<const char*, int64_t>{"--height", options.height}, {"--width", options.width}})
      DETSEG_CONFIG_CHECK(side <= kMaxTracedSide, "export: ", flag, " ", side, ": above ", kMaxTracedSide,
                          ", the longest image side detseg resizes to (model.max_dimension's limit); a ", h, "x", w,
                          " input alone would take ", gigabytes(12.0 * static_cast<double>(h) * static_cast<double>(w)));
  }
  check_model_fits_in_memory(config, ModelUse::kInference);
  if (options.format == "safetensors") return export_safetensors(config, options);
  DETSEG_CONFIG_CHECK(options.format == "torchscript" || options.format == "onnx", "export: --format ", options.format,
                      " is not one of torchscript, onnx, safetensors");
  return export_traced(config, options);
}

bool is_exported_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  if (!in.read(magic, 4) || std::string(magic, 4) != std::string("PK\x03\x04", 4)) return false;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    return reader.hasRecord(std::string("extra/") + kMetaFile);
  } catch (const std::exception&) {
    return false;
  }
}

ExportedModelInfo read_exported_model_info(const std::string& path) {
  DETSEG_CHECK(is_exported_model(path), path, ": not a TorchScript file written by detseg export (no extra/",
               kMetaFile, ")");
  caffe2::serialize::PyTorchStreamReader reader(path);
  auto record = [&](const std::string& name) {
    auto [data, size] = reader.getRecord("extra/" + name);
    return std::string(static_cast<const char*>(data.get()), size);
  };
  ExportedModelInfo info;
  info.config = parse_config(record(kConfigFile), path + ":extra/" + kConfigFile);
  const nlohmann::json meta = nlohmann::json::parse(record(kMetaFile), nullptr, false);
  DETSEG_CHECK(meta.is_object() && meta.contains("input") && meta["input"].is_array() && meta["input"].size() == 4,
               path, ": extra/", kMetaFile, ": no input shape");
  info.height = meta["input"][2].get<int64_t>();
  info.width = meta["input"][3].get<int64_t>();
  info.step = meta.value("step", int64_t{0});
  if (meta.contains("outputs")) meta["outputs"].get_to(info.outputs);
  if (meta.contains("class_names")) meta["class_names"].get_to(info.class_names);
  if (meta.contains("category_ids")) meta["category_ids"].get_to(info.category_ids);
  return info;
}

void fit_loader_to_exported_model(LoaderOptions& loader, const ExportedModelInfo& info) {
  loader.batch_size = 1;
  if (is_segmentation_model(info.config)) {
    loader.augment.resize = AugmentOptions::Resize::kFixed;
    loader.augment.out_h = info.height;
    loader.augment.out_w = info.width;
    loader.collate.size_divisibility = 1;
    return;
  }
  // Detectors: resized as their config says, padded to the traced size (predict refuses an image
  // that resizes larger; keep_aspect's default traced size fits every image).
  loader.collate.fixed_height = info.height;
  loader.collate.fixed_width = info.width;
}

void use_exported_network(ModelImpl& model, const std::string& path, const at::Device& device) {
  // The model must be the kind the graph was traced from (a --config of another model.type would
  // otherwise run its own untrained layers, or none).
  const std::vector<std::string> expected = model.network_output_names();
  const std::vector<std::string> outputs = read_exported_model_info(path).outputs;
  DETSEG_CONFIG_CHECK(!expected.empty() && outputs.size() >= expected.size() &&
                          std::equal(expected.begin(), expected.end(), outputs.begin()),
                      path, ": the exported graph's outputs (", joined(outputs, ", "), ") are not what this config's model "
                      "takes (", expected.empty() ? std::string("it cannot run an exported graph") : joined(expected, ", "),
                      "): predict it without --config, or with the config it was exported from");
  auto module = std::make_shared<torch::jit::Module>(torch::jit::load(path, device));
  module->eval();
  for (const auto& graph : model.network_graphs())
    DETSEG_CONFIG_CHECK(module->find_method(graph.name).has_value(), path, ": the exported module has no ", graph.name,
                        " method, which this model's ", graph.name, " stage runs; export it again with this detseg");
  model.use_network([module](const std::string& graph, const std::vector<at::Tensor>& inputs) {
    const c10::IValue out = module->get_method(graph)(std::vector<c10::IValue>(inputs.begin(), inputs.end()));
    std::vector<at::Tensor> tensors;
    if (out.isTuple()) {
      for (const c10::IValue& v : out.toTupleRef().elements()) tensors.push_back(v.toTensor());
    } else {
      tensors.push_back(out.toTensor());
    }
    return tensors;
  });
}

}  // namespace detseg
