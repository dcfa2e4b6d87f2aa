// The dtype table: every element type a safetensors file may hold, with its on-disk name and width.
//
// One table (dtype.cc) drives parsing, validation and printing; add a dtype there and nowhere else.
// This is the lowest piece of the tensor layer, which sits below safetensors/ so that the container
// parser can validate sizes (the layer order of docs/design.md). Pure functions over constant data:
// thread-safe. Unknown names are an error, never a default.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace spk {

enum class DType : uint8_t {
  kBool,
  kF4,
  kF6E2M3,
  kF6E3M2,
  kU8,
  kI8,
  kF8E5M2,
  kF8E4M3,
  kF8E8M0,
  kF8E4M3Fnuz,
  kF8E5M2Fnuz,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kC64,
  kF64,
  kI64,
  kU64,
};

// The safetensors name ("BF16"); never empty.
std::string_view DTypeName(DType dtype);
// Parses a safetensors dtype name exactly (case-sensitive), or nullopt.
std::optional<DType> DTypeFromName(std::string_view name);
// Bits per element (4 for F4, 6 for F6_*, 16 for BF16, ...).
unsigned DTypeBits(DType dtype);
// True for BF16, F16 and F32: the dtypes that sparkulator quantizes from.
bool IsQuantizableFloat(DType dtype);
// True for every floating-point dtype (including F8/F6/F4 and C64).
bool IsFloat(DType dtype);

}  // namespace spk
