#include "tensor/dtype.h"

#include <array>

namespace spk {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  unsigned bits;
  bool is_float;
};

// Same order as the enum; mirrors huggingface/safetensors `Dtype` (safetensors/src/tensor.rs).
constexpr std::array<DTypeInfo, 22> kTable = {{
    {DType::kBool, "BOOL", 8, false},
    {DType::kF4, "F4", 4, true},
    {DType::kF6E2M3, "F6_E2M3", 6, true},
    {DType::kF6E3M2, "F6_E3M2", 6, true},
    {DType::kU8, "U8", 8, false},
    {DType::kI8, "I8", 8, false},
    {DType::kF8E5M2, "F8_E5M2", 8, true},
    {DType::kF8E4M3, "F8_E4M3", 8, true},
    {DType::kF8E8M0, "F8_E8M0", 8, true},
    {DType::kF8E4M3Fnuz, "F8_E4M3FNUZ", 8, true},
    {DType::kF8E5M2Fnuz, "F8_E5M2FNUZ", 8, true},
    {DType::kI16, "I16", 16, false},
    {DType::kU16, "U16", 16, false},
    {DType::kF16, "F16", 16, true},
    {DType::kBF16, "BF16", 16, true},
    {DType::kI32, "I32", 32, false},
    {DType::kU32, "U32", 32, false},
    {DType::kF32, "F32", 32, true},
    {DType::kC64, "C64", 64, true},
    {DType::kF64, "F64", 64, true},
    {DType::kI64, "I64", 64, false},
    {DType::kU64, "U64", 64, false},
}};

const DTypeInfo& Info(DType dtype) { return kTable[static_cast<size_t>(dtype)]; }

}  // namespace

std::string_view DTypeName(DType dtype) { return Info(dtype).name; }

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const DTypeInfo& info : kTable) {
    if (info.name == name) return info.dtype;
  }
  return std::nullopt;
}

unsigned DTypeBits(DType dtype) { return Info(dtype).bits; }

bool IsQuantizableFloat(DType dtype) {
  return dtype == DType::kBF16 || dtype == DType::kF16 || dtype == DType::kF32;
}

bool IsFloat(DType dtype) { return Info(dtype).is_float; }

}  // namespace spk
