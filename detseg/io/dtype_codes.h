// Implements: the one table of tensor dtypes our file formats store, with each format's code
// (our checkpoints' short names, safetensors' upper-case names).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <limits>
#include <vector>

namespace detseg {

struct DtypeCode {
  c10::ScalarType type;
  const char* checkpoint;   // .dsckpt header
  const char* safetensors;  // safetensors header
};

inline constexpr DtypeCode kDtypeCodes[] = {
    {c10::kFloat, "f32", "F32"},      {c10::kDouble, "f64", "F64"}, {c10::kHalf, "f16", "F16"},
    {c10::kBFloat16, "bf16", "BF16"}, {c10::kLong, "i64", "I64"},   {c10::kInt, "i32", "I32"},
    {c10::kShort, "i16", "I16"},      {c10::kChar, "i8", "I8"},     {c10::kByte, "u8", "U8"},
    {c10::kBool, "bool", "BOOL"},
};

// The entry for a dtype, or nullptr when no format here stores it.
inline const DtypeCode* find_dtype_code(c10::ScalarType type) {
  for (const auto& d : kDtypeCodes)
    if (d.type == type) return &d;
  return nullptr;
}

// Bytes a tensor of `shape` and `type` takes, computed without overflow, or UINT64_MAX when a
// dimension is negative or the size would pass `limit` (the bytes a file really has): the readers
// compare a header's claim with this before anything that large is allocated.
inline uint64_t tensor_bytes_within(const std::vector<int64_t>& shape, c10::ScalarType type, uint64_t limit) {
  uint64_t bytes = c10::elementSize(type);
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && bytes > limit / static_cast<uint64_t>(d))) return std::numeric_limits<uint64_t>::max();
    bytes *= static_cast<uint64_t>(d);
  }
  return bytes;
}

}  // namespace detseg
