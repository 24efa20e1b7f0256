// Implements: the safetensors reader and writer declared in safetensors.h.
#include "detseg/io/safetensors.h"

#include <ATen/ATen.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/io/dtype_codes.h"

namespace detseg {
using ojson = nlohmann::ordered_json;

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  ojson header = ojson::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> data;
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    DETSEG_CHECK(name != "__metadata__" && seen.insert(name).second, path, ": safetensors name '",
                 name, "' is reserved or repeated");
    at::Tensor c = t.detach().to(at::kCPU).contiguous();
    const DtypeCode* entry = find_dtype_code(c.scalar_type());
    const char* code = entry ? entry->safetensors : nullptr;
    DETSEG_CHECK(code, path, ": tensor '", name, "' has dtype ", c.scalar_type(),
                 ", which safetensors export does not support");
    const uint64_t n = c.numel() * c.element_size();
    header[name] = {
        {"dtype", code}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + n}}};
    offset += n;
    data.push_back(std::move(c));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data 8-byte aligned
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((uint64_t(text.size()) >> (8 * i)) & 0xff);
  out += text;
  out.reserve(out.size() + offset);
  for (const auto& c : data)
    out.append(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
  write_file_atomic(path, out);
}

NamedTensors read_safetensors(const std::string& path,
                              std::map<std::string, std::string>* metadata) {
  const std::string bytes = read_file(path);
  DETSEG_CHECK(bytes.size() >= 8, path, ": truncated safetensors file (", bytes.size(), " bytes)");
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= uint64_t(static_cast<uint8_t>(bytes[i])) << (8 * i);
  DETSEG_CHECK(header_len <= bytes.size() - 8, path, ": truncated safetensors file (header of ",
               header_len, " bytes, file has ", bytes.size(), ")");
  ojson header;
  try {
    header = ojson::parse(bytes.begin() + 8, bytes.begin() + 8 + header_len);
  } catch (const ojson::exception& e) {
    throw Error(str(path, ": not a safetensors file (header is not JSON: ", e.what(), ")"));
  }
  DETSEG_CHECK(header.is_object(), path, ": safetensors header is not a JSON object");
  const char* data = bytes.data() + 8 + header_len;
  const uint64_t data_len = bytes.size() - 8 - header_len;
  NamedTensors out;
  try {
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        if (metadata)
          for (const auto& [k, v] : entry.items()) (*metadata)[k] = v.get<std::string>();
        continue;
      }
      const std::string code = entry.at("dtype").get<std::string>();
      const DtypeCode* dt = nullptr;
      for (const auto& d : kDtypeCodes)
        if (code == d.safetensors) dt = &d;
      DETSEG_CHECK(dt, path, ": tensor '", name, "' has unsupported dtype ", code);
      // Integers only: nlohmann converts a float such as 4e72 to an integer type without a check
      // (undefined behaviour).
      for (const char* key : {"shape", "data_offsets"}) {
        const auto& list = entry.at(key);
        DETSEG_CHECK(list.is_array(), path, ": tensor '", name, "': ", key, " must be a list of integers");
        for (const auto& v : list)
          DETSEG_CHECK(v.is_number_unsigned(), path, ": tensor '", name, "': ", key,
                       " must be a list of integers >= 0, got ", v.dump());
      }
      const auto shape = entry.at("shape").get<std::vector<int64_t>>();
      const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
      DETSEG_CHECK(offsets.size() == 2 && offsets[0] <= offsets[1] && offsets[1] <= data_len, path,
                   ": tensor '", name, "' lies outside the data (truncated file?)");
      // The shape's size against the bytes that are there before anything is allocated: a header
      // claiming [1e9, 1e9] must not reach at::empty.
      const uint64_t nbytes = tensor_bytes_within(shape, dt->type, offsets[1] - offsets[0]);
      DETSEG_CHECK(offsets[1] - offsets[0] == nbytes, path, ": tensor '", name, "' has ", offsets[1] - offsets[0],
                   " bytes for shape ", c10::IntArrayRef(shape));
      at::Tensor t = at::empty(shape, at::TensorOptions(dt->type));
      if (t.numel()) std::memcpy(t.data_ptr(), data + offsets[0], offsets[1] - offsets[0]);
      out.emplace_back(name, std::move(t));
    }
  } catch (const ojson::exception& e) {
    throw Error(str(path, ": malformed safetensors header: ", e.what()));
  }
  return out;
}

}  // namespace detseg
