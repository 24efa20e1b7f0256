// Implements: the .dsckpt format, its atomic writer and reader, the module/optimizer/RNG adapters
// and the model_dir/ checkpoint manager.
//
// Layout (little-endian):
//   [0, 8)    magic "DSEGCKPT"
//   [8, 12)   u32 format version
//   [12, 16)  u32 reserved (0)
//   [16, 24)  u64 header length H
//   [24, 24+H) JSON header: step, metadata, payload length, and for every section ("model",
//             "ema", "rng", "loop"; "loop" may be absent in older files) a list of [name, dtype, shape, offset, nbytes]; blobs {"optimizer":
//             [offset, nbytes]}. Offsets are relative to the payload start.
//   payload   raw contiguous tensor bytes and blobs
//   footer    "DSCKEND\0" + u32 CRC32C of every byte before the footer
#include "detseg/train/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fcntl.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "detseg/core/error.h"
#include "detseg/core/stop_signal.h"
#include "detseg/core/files.h"
#include "detseg/io/crc32c.h"
#include "detseg/io/dtype_codes.h"
#include "detseg/train/ema.h"

namespace detseg {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr char kMagic[8] = {'D', 'S', 'E', 'G', 'C', 'K', 'P', 'T'};
constexpr char kFooterMagic[8] = {'D', 'S', 'C', 'K', 'E', 'N', 'D', '\0'};
constexpr size_t kPrefixBytes = 24;
constexpr size_t kFooterBytes = 12;
constexpr const char* kSections[] = {"model", "ema", "rng", "loop"};
constexpr size_t kNumSections = 4;

const char* dtype_name(at::ScalarType t) {
  const DtypeCode* d = find_dtype_code(t);
  if (!d) throw Error(str("checkpoint: unsupported tensor dtype ", t));
  return d->checkpoint;
}

std::optional<at::ScalarType> dtype_from_name(const std::string& name) {
  for (const auto& d : kDtypeCodes)
    if (name == d.checkpoint) return d.type;
  return std::nullopt;
}

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

// A file written under a temporary name, renamed into place on commit(); CRC of all bytes kept.
class AtomicWriter {
 public:
  AtomicWriter(std::string path, size_t total, const WriteProgressHook& hook)
      : path_(std::move(path)),
        tmp_(path_ + ".tmp." + std::to_string(::getpid())),
        total_(total),
        hook_(hook) {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    DETSEG_CHECK(fd_ >= 0, tmp_, ": cannot create: ", std::strerror(errno));
  }
  ~AtomicWriter() {
    if (fd_ >= 0) {  // not committed: an exception is unwinding
      ::close(fd_);
      ::unlink(tmp_.c_str());
    }
  }
  void write(const void* data, size_t size) {
    crc_ = crc32c_extend(crc_, data, size);
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      const size_t chunk = std::min<size_t>(size, 1 << 20);
      ssize_t n = ::write(fd_, p, chunk);
      if (n < 0 && errno == EINTR) continue;
      DETSEG_CHECK(n > 0, tmp_, ": write failed: ", std::strerror(errno));
      p += n;
      size -= static_cast<size_t>(n);
      written_ += static_cast<size_t>(n);
      if (hook_) hook_(written_, total_);
    }
  }
  uint32_t crc() const { return crc_; }
  void commit() {
    const bool ok = ::fsync(fd_) == 0;
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (!ok || ::rename(tmp_.c_str(), path_.c_str()) != 0) {
      ::unlink(tmp_.c_str());
      throw Error(
          str(path_, ": cannot finish checkpoint write: ", std::strerror(ok ? errno : err)));
    }
    const fs::path parent = fs::path(path_).parent_path();
    int dfd = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {  // make the rename itself durable
      ::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  std::string path_, tmp_;
  size_t total_ = 0, written_ = 0;
  const WriteProgressHook& hook_;
  int fd_ = -1;
  uint32_t crc_ = 0;
};

std::string section_error(const std::string& path, const std::string& what) {
  return str(path, ": corrupt checkpoint: ", what);
}

}  // namespace

void write_checkpoint(const std::string& path, const Checkpoint& ckpt,
                      const WriteProgressHook& hook) {
  DETSEG_CHECK(json::accept(ckpt.metadata_json), path, ": checkpoint metadata is not valid JSON");
  // Contiguous CPU copies first: their sizes fix the payload offsets in the header.
  std::vector<at::Tensor> payload_tensors;
  json header;
  header["step"] = ckpt.step;
  header["metadata"] = json::parse(ckpt.metadata_json);
  uint64_t offset = 0;
  const NamedTensors* sections[] = {&ckpt.model, &ckpt.ema, &ckpt.rng, &ckpt.loop};
  json tensors = json::object();
  for (size_t s = 0; s < kNumSections; ++s) {
    json entries = json::array();
    for (const auto& [name, t] : *sections[s]) {
      DETSEG_CHECK(t.defined(), path, ": tensor '", name, "' in section ", kSections[s],
                   " is undefined");
      at::Tensor c = t.detach().to(at::kCPU).contiguous();
      const uint64_t nbytes = c.numel() * c.element_size();
      entries.push_back({name, dtype_name(c.scalar_type()), c.sizes().vec(), offset, nbytes});
      offset += nbytes;
      payload_tensors.push_back(std::move(c));
    }
    tensors[kSections[s]] = std::move(entries);
  }
  header["tensors"] = std::move(tensors);
  header["blobs"] = {{"optimizer", {offset, ckpt.optimizer.size()}}};
  offset += ckpt.optimizer.size();
  header["payload_bytes"] = offset;
  const std::string header_text = header.dump();

  std::string prefix(kMagic, sizeof(kMagic));
  put_u32(prefix, kCheckpointVersion);
  put_u32(prefix, 0);
  put_u64(prefix, header_text.size());
  const size_t total = kPrefixBytes + header_text.size() + offset + kFooterBytes;
  AtomicWriter out(path, total, hook);
  out.write(prefix.data(), prefix.size());
  out.write(header_text.data(), header_text.size());
  for (const auto& t : payload_tensors) out.write(t.data_ptr(), t.numel() * t.element_size());
  out.write(ckpt.optimizer.data(), ckpt.optimizer.size());
  std::string footer(kFooterMagic, sizeof(kFooterMagic));
  put_u32(footer, out.crc());
  out.write(footer.data(), footer.size());
  out.commit();
}

std::vector<std::string> checkpoint_class_names(const std::string& path) {
  const nlohmann::json meta = nlohmann::json::parse(read_checkpoint_metadata(path), nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> names;
  if (!meta.is_object() || !meta.contains("class_names") || !meta["class_names"].is_array()) return names;
  for (const auto& name : meta["class_names"]) {
    DETSEG_CHECK(name.is_string(), path, ": metadata class_names holds a non-string");
    names.push_back(name.get<std::string>());
  }
  return names;
}

std::string read_checkpoint_metadata(const std::string& path) {
  DETSEG_CHECK(!is_directory(path), path, ": is a folder, expected a checkpoint file");
  std::ifstream in(path, std::ios::binary);
  DETSEG_CHECK(in, path, ": cannot open checkpoint");
  std::string prefix(kPrefixBytes, '\0');
  in.read(prefix.data(), static_cast<std::streamsize>(prefix.size()));
  const size_t got = static_cast<size_t>(in.gcount());
  DETSEG_CHECK(got >= sizeof(kMagic) && std::memcmp(prefix.data(), kMagic, sizeof(kMagic)) == 0, path,
               ": not a detseg checkpoint (no 'DSEGCKPT' magic at the start)");
  DETSEG_CHECK(got == kPrefixBytes, path, ": truncated checkpoint (", got, " bytes, shorter than the fixed header)");
  const uint32_t version = static_cast<uint32_t>(get_le(prefix.data() + 8, 4));
  DETSEG_CHECK(version >= 1 && version <= kCheckpointVersion, path, ": checkpoint format version ", version,
               " is not supported (this build reads up to ", kCheckpointVersion, "); HINT: use a newer detseg");
  const uint64_t header_len = get_le(prefix.data() + 16, 8);
  // The length is the file's word: checked against the file's size before a buffer that large is
  // allocated (a damaged header made every look at the file allocate and clear up to 1 GB).
  in.seekg(0, std::ios::end);
  const uint64_t file_bytes = static_cast<uint64_t>(in.tellg());
  in.seekg(static_cast<std::streamoff>(kPrefixBytes));
  DETSEG_CHECK(header_len <= file_bytes - kPrefixBytes, path, ": truncated checkpoint (header needs ",
               kPrefixBytes + header_len, " bytes, the file has ", file_bytes, ")");
  std::string header_text(header_len, '\0');
  in.read(header_text.data(), static_cast<std::streamsize>(header_text.size()));
  DETSEG_CHECK(static_cast<uint64_t>(in.gcount()) == header_len, path, ": truncated checkpoint (header needs ",
               kPrefixBytes + header_len, " bytes, the file has ", kPrefixBytes + in.gcount(), ")");
  try {
    return json::parse(header_text).at("metadata").dump();
  } catch (const json::exception& e) {
    throw Error(section_error(path, str("header is not valid JSON (", e.what(), ")")));
  }
}

bool is_checkpoint_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[sizeof(kMagic)] = {};
  return in.read(magic, sizeof(magic)) && std::memcmp(magic, kMagic, sizeof(kMagic)) == 0;
}

Checkpoint read_checkpoint(const std::string& path) {
  const std::string data = read_file(path);
  if (data.size() < sizeof(kMagic) || std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0) {
    const bool zip = data.size() >= 4 && data.compare(0, 4, "PK\x03\x04") == 0;
    throw Error(str(path, ": not a detseg checkpoint (no 'DSEGCKPT' magic at the start",
                    zip ? "; it looks like a torch.save .pth file: use it as a fine-tune "
                          "checkpoint instead"
                        : "",
                    ")"));
  }
  DETSEG_CHECK(data.size() >= kPrefixBytes + kFooterBytes, path, ": truncated checkpoint (",
               data.size(), " bytes, shorter than the fixed header)");
  const uint32_t version = static_cast<uint32_t>(get_le(data.data() + 8, 4));
  DETSEG_CHECK(version >= 1 && version <= kCheckpointVersion, path, ": checkpoint format version ",
               version, " is not supported (this build reads up to ", kCheckpointVersion,
               "); HINT: use a newer detseg");
  const uint64_t header_len = get_le(data.data() + 16, 8);
  DETSEG_CHECK(header_len <= data.size() - kPrefixBytes - kFooterBytes, path,
               ": truncated checkpoint (", data.size(), " bytes, header alone needs ",
               kPrefixBytes + header_len + kFooterBytes, ")");
  json header;
  try {
    header = json::parse(data.begin() + kPrefixBytes, data.begin() + kPrefixBytes + header_len);
  } catch (const json::exception& e) {
    throw Error(section_error(path, str("header is not valid JSON (", e.what(), ")")));
  }
  Checkpoint ckpt;
  try {
    DETSEG_CHECK(header.at("payload_bytes").is_number_unsigned() && header.at("step").is_number_integer(),
                 section_error(path, "header's payload_bytes/step are not integers"));
    const uint64_t payload_bytes = header.at("payload_bytes").get<uint64_t>();
    const uint64_t expected = kPrefixBytes + header_len + payload_bytes + kFooterBytes;
    DETSEG_CHECK(
        data.size() == expected, path,
        data.size() < expected ? ": truncated checkpoint (" : ": checkpoint has trailing bytes (",
        data.size(), " bytes, its header says ", expected, ")");
    const size_t footer_at = data.size() - kFooterBytes;
    DETSEG_CHECK(std::memcmp(data.data() + footer_at, kFooterMagic, sizeof(kFooterMagic)) == 0,
                 section_error(path, "footer magic missing"));
    const uint32_t stored_crc = static_cast<uint32_t>(get_le(data.data() + footer_at + 8, 4));
    const uint32_t crc = crc32c(data.data(), footer_at);
    DETSEG_CHECK(stored_crc == crc, section_error(path,
                                                  "CRC32C mismatch (the bytes changed after "
                                                  "it was written)"));
    const char* payload = data.data() + kPrefixBytes + header_len;
    auto in_payload = [&](uint64_t off, uint64_t n) {
      return off <= payload_bytes && n <= payload_bytes - off;
    };
    ckpt.step = header.at("step").get<int64_t>();
    ckpt.metadata_json = header.at("metadata").dump();
    NamedTensors* sections[] = {&ckpt.model, &ckpt.ema, &ckpt.rng, &ckpt.loop};
    for (size_t s = 0; s < kNumSections; ++s) {
      if (!header.at("tensors").contains(kSections[s])) continue;  // "loop" is newer than the format
      for (const auto& e : header.at("tensors").at(kSections[s])) {
        const std::string name = e.at(0).get<std::string>();
        const auto dtype = dtype_from_name(e.at(1).get<std::string>());
        DETSEG_CHECK(dtype,
                     section_error(path, str("tensor '", name, "' has unknown dtype ", e.at(1))));
        // Integers only: nlohmann converts a float such as 4e72 to an integer without a check.
        DETSEG_CHECK(e.at(2).is_array() && e.at(3).is_number_unsigned() && e.at(4).is_number_unsigned(),
                     section_error(path, str("tensor '", name, "' has a malformed shape/offset/size")));
        for (const auto& d : e.at(2))
          DETSEG_CHECK(d.is_number_unsigned(), section_error(path, str("tensor '", name, "' has a malformed shape")));
        const auto shape = e.at(2).get<std::vector<int64_t>>();
        const uint64_t off = e.at(3).get<uint64_t>(), nbytes = e.at(4).get<uint64_t>();
        // The shape's size is checked against bytes that are really there before anything is
        // allocated: a header claiming [1e9, 1e9] (or a negative dimension) must not reach at::empty.
        const uint64_t expect = tensor_bytes_within(shape, *dtype, payload_bytes);
        DETSEG_CHECK(nbytes == expect && in_payload(off, nbytes),
                     section_error(path, str("tensor '", name, "' has inconsistent size/offset")));
        at::Tensor t = at::empty(shape, at::TensorOptions(*dtype));
        if (nbytes) std::memcpy(t.data_ptr(), payload + off, nbytes);
        sections[s]->emplace_back(name, std::move(t));
      }
    }
    const auto& blob = header.at("blobs").at("optimizer");
    DETSEG_CHECK(blob.at(0).is_number_unsigned() && blob.at(1).is_number_unsigned(),
                 section_error(path, "optimizer blob offset/size are not integers"));
    const uint64_t off = blob.at(0).get<uint64_t>(), n = blob.at(1).get<uint64_t>();
    DETSEG_CHECK(in_payload(off, n), section_error(path, "optimizer blob out of range"));
    ckpt.optimizer.assign(payload + off, n);
  } catch (const json::exception& e) {
    throw Error(section_error(path, str("header misses fields (", e.what(), ")")));
  }
  return ckpt;
}

// ---- adapters

NamedTensors module_state(const torch::nn::Module& module) {
  NamedTensors out;
  for (const auto& item : module.named_parameters(true)) out.emplace_back(item.key(), item.value());
  for (const auto& item : module.named_buffers(true)) out.emplace_back(item.key(), item.value());
  return out;
}

void load_module_state(torch::nn::Module& module, const NamedTensors& state,
                       const std::string& what) {
  std::unordered_map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, t] : state) by_name[name] = &t;
  std::vector<std::string> missing, mismatched;
  std::set<std::string> used;
  NamedTensors targets = module_state(module);
  for (const auto& [name, t] : targets) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      missing.push_back(name);
    } else if (it->second->sizes() != t.sizes()) {
      mismatched.push_back(str(name, " ", it->second->sizes(), " vs model ", t.sizes()));
    }
    used.insert(name);
  }
  std::vector<std::string> unexpected;
  for (const auto& [name, t] : state)
    if (!used.count(name)) unexpected.push_back(name);
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < 10; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > 10) s += str(", ... (", v.size(), " in all)");
    return s;
  };
  DETSEG_CHECK(missing.empty() && mismatched.empty() && unexpected.empty(), what,
               ": model state does not match the model;",
               missing.empty() ? "" : " missing: ", join(missing),
               mismatched.empty() ? "" : " shape mismatch: ", join(mismatched),
               unexpected.empty() ? "" : " unexpected: ", join(unexpected));
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : targets) t.copy_(*by_name.at(name));
}

std::string optimizer_state_bytes(torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  std::ostringstream os;
  archive.save_to(os);
  return os.str();
}

void load_optimizer_state(torch::optim::Optimizer& optimizer, const std::string& bytes) {
  DETSEG_CHECK(!bytes.empty(), "load_optimizer_state: the checkpoint holds no optimizer state");
  torch::serialize::InputArchive archive;
  std::istringstream is(bytes);
  // The state lands on the parameters' device, whatever device wrote it (train on GPU, resume on
  // CPU and back).
  std::optional<at::Device> device;
  for (const auto& group : optimizer.param_groups())
    if (!group.params().empty()) device = group.params().front().device();
  archive.load_from(is, device);
  optimizer.load(archive);
}

NamedTensors rng_states() {
  NamedTensors out;
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    out.emplace_back("cpu", gen.get_state());
  }
  // Each GPU's generator too (dropout and sampling on the GPU draw from it), when one was used.
  if (at::hasCUDA()) {
    for (c10::DeviceIndex i = 0; i < static_cast<c10::DeviceIndex>(at::getNumGPUs()); ++i) {
      auto gen = at::globalContext().defaultGenerator(at::Device(at::kCUDA, i));
      std::lock_guard<std::mutex> lock(gen.mutex());
      out.emplace_back(str("cuda:", static_cast<int>(i)), gen.get_state());
    }
  }
  return out;
}

void restore_rng_states(const NamedTensors& states) {
  for (const auto& [name, state] : states) {
    if (name.rfind("cuda:", 0) == 0) {
      // A GPU run resumed on a machine without that GPU: the CPU state still makes the data order
      // and augmentation identical; only GPU-side random draws differ.
      const int index = std::atoi(name.c_str() + 5);
      if (!at::hasCUDA() || index >= static_cast<int>(at::getNumGPUs())) continue;
      auto gen = at::globalContext().defaultGenerator(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index)));
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(state);
      continue;
    }
    DETSEG_CHECK(name == "cpu", "checkpoint RNG state '", name, "' is not supported by this build");
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
  }
}

// ---- whole training state

Checkpoint capture_training_state(int64_t step, const torch::nn::Module& model,
                                  torch::optim::Optimizer* optimizer, const WeightEma* ema,
                                  std::string metadata_json) {
  Checkpoint c;
  c.step = step;
  c.model = module_state(model);
  if (optimizer) c.optimizer = optimizer_state_bytes(*optimizer);
  if (ema) {
    DETSEG_CHECK(!ema->swapped(), "checkpoint while the EMA averages are swapped into the model");
    c.ema = ema->shadow();
  }
  c.rng = rng_states();
  c.metadata_json = std::move(metadata_json);
  return c;
}

int64_t restore_training_state(const std::string& path, torch::nn::Module& model,
                               torch::optim::Optimizer* optimizer, WeightEma* ema, NamedTensors* loop_state) {
  const Checkpoint c = read_checkpoint(path);
  if (loop_state) *loop_state = c.loop;
  load_module_state(model, c.model, path);
  if (optimizer && !c.optimizer.empty()) load_optimizer_state(*optimizer, c.optimizer);
  if (ema && !c.ema.empty()) ema->load(c.ema);
  restore_rng_states(c.rng);
  return c.step;
}

int64_t load_weights_for_eval(const std::string& path, torch::nn::Module& model, bool use_ema) {
  const Checkpoint c = read_checkpoint(path);
  load_module_state(model, c.model, path);
  if (use_ema && !c.ema.empty()) {
    std::unordered_map<std::string, at::Tensor> targets;
    for (auto& [name, t] : module_state(model)) targets.emplace(name, t);
    torch::NoGradGuard no_grad;
    for (const auto& [name, avg] : c.ema) {
      auto it = targets.find(name);
      DETSEG_CHECK(it != targets.end() && it->second.sizes() == avg.sizes(), path, ": EMA tensor '",
                   name, "' does not match the model");
      it->second.copy_(avg);
    }
  }
  return c.step;
}

// ---- manager

CheckpointManager::CheckpointManager(CheckpointManagerOptions options)
    : options_(std::move(options)) {
  DETSEG_CONFIG_CHECK(!options_.model_dir.empty(), "checkpoint manager: model_dir is empty");
  DETSEG_CONFIG_CHECK(options_.keep >= 0, "checkpoints to keep must be >= 0, got ", options_.keep);
  DETSEG_CONFIG_CHECK(options_.save_every_steps > 0, "checkpoint every N steps must be > 0, got ",
                      options_.save_every_steps);
}

std::string CheckpointManager::path_for_step(int64_t step) const {
  return (fs::path(options_.model_dir) / str("ckpt-", step, kCheckpointExtension)).string();
}

std::string CheckpointManager::index_path() const {
  return (fs::path(options_.model_dir) / "checkpoint_index.json").string();
}

bool CheckpointManager::due(int64_t step) const {
  return step > 0 && step % options_.save_every_steps == 0;
}

std::vector<CheckpointEntry> CheckpointManager::list() const {
  std::vector<CheckpointEntry> out;
  if (!fs::is_directory(options_.model_dir)) return out;
  static const std::regex name_re(R"(^ckpt-(\d+)\.dsckpt$)");
  for (const auto& entry : fs::directory_iterator(options_.model_dir)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && std::regex_match(name, m, name_re))
      out.push_back({std::stoll(m[1].str()), entry.path().string()});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return out;
}

std::optional<std::string> CheckpointManager::latest() const {
  if (file_exists(index_path())) {
    try {
      const json index = json::parse(read_file(index_path()));
      const std::string path =
          (fs::path(options_.model_dir) / index.at("latest").get<std::string>()).string();
      if (file_exists(path)) return path;
    } catch (const std::exception&) {
      // A damaged index falls back to scanning the folder.
    }
  }
  const auto all = list();
  if (all.empty()) return std::nullopt;
  return all.back().path;
}

std::string CheckpointManager::save(const Checkpoint& checkpoint, const WriteProgressHook& hook) {
  make_directories(options_.model_dir);
  // Temp files left by a writer that was killed mid-save are garbage now.
  for (const auto& entry : fs::directory_iterator(options_.model_dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ckpt-", 0) == 0 && name.find(".tmp.") != std::string::npos) {
      std::error_code ec;
      fs::remove(entry.path(), ec);
    }
  }
  const std::string path = path_for_step(checkpoint.step);
  write_checkpoint(path, checkpoint, hook);
  auto all = list();
  if (options_.keep > 0 && all.size() > static_cast<size_t>(options_.keep)) {
    const size_t drop = all.size() - static_cast<size_t>(options_.keep);
    for (size_t i = 0; i < drop; ++i) {
      if (all[i].path == path) continue;  // never the one just written
      std::error_code ec;
      fs::remove(all[i].path, ec);
    }
    all = list();
  }
  json index;
  index["latest"] = fs::path(path).filename().string();
  index["latest_step"] = checkpoint.step;
  json kept = json::array();
  for (const auto& e : all) kept.push_back(fs::path(e.path).filename().string());
  index["checkpoints"] = std::move(kept);
  write_file_atomic(index_path(), index.dump(2) + "\n");
  return path;
}

CheckpointWatcher::CheckpointWatcher(CheckpointWatchOptions options)
    : options_(std::move(options)) {
  DETSEG_CONFIG_CHECK(!options_.checkpoint_dir.empty(), "checkpoint watcher: no checkpoint dir");
  DETSEG_CONFIG_CHECK(options_.wait_interval_s >= 0 && options_.poll_interval_s > 0,
                      "checkpoint watcher: wait interval must be >= 0 and poll interval > 0");
}

std::optional<std::string> CheckpointWatcher::next() {
  using clock = std::chrono::steady_clock;
  const CheckpointManager manager(CheckpointManagerOptions{options_.checkpoint_dir});
  const double limit = last_ ? options_.wait_interval_s : options_.first_checkpoint_timeout_s;
  const auto start = clock::now();
  while (true) {
    throw_if_stop_requested("continuous evaluation");
    const auto latest = manager.latest();
    if (latest && latest != last_) {
      last_ = latest;
      return latest;
    }
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    if (limit >= 0 && waited >= limit) return std::nullopt;
    const double nap =
        limit >= 0 ? std::min(options_.poll_interval_s, limit - waited) : options_.poll_interval_s;
    std::this_thread::sleep_for(std::chrono::duration<double>(nap));
  }
}

bool model_dir_has_checkpoint(const std::string& model_dir) {
  if (model_dir.empty()) return false;
  return CheckpointManager(CheckpointManagerOptions{model_dir}).latest().has_value();
}

}  // namespace detseg
