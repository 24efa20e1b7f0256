// Implements: the one table of tensor dtypes our file formats store, with each format's code
// (our checkpoints' short names, safetensors' upper-case names).
#pragma once

#include <c10/core/ScalarType.h>

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

}  // namespace detseg
