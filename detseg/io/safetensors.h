// Implements: reading and writing the safetensors format (u64 header length, a JSON header
// {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then the raw little-endian
// tensor bytes), the common interchange format for weights.
#pragma once

#include <map>
#include <string>

#include "detseg/io/named_tensors.h"

namespace detseg {

// Writes atomically; tensors are copied to contiguous CPU memory. Names must be unique and must
// not be "__metadata__".
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Tensors in header order. Throws Error naming the file for a truncated or malformed file,
// offsets outside the data, sizes that do not match the shape, or an unsupported dtype.
NamedTensors read_safetensors(const std::string& path,
                              std::map<std::string, std::string>* metadata = nullptr);

}  // namespace detseg
