#include "checkpoint/quantized_modules.h"

namespace spk {

std::string_view ValueSuffix(const WeightCodec& codec) {
  // Every codec lists its value tensor first (quant/codec.h suffixes()).
  return codec.suffixes().front();
}

std::optional<std::string> QuantizedModuleOf(
    const WeightCodec& codec, std::string_view name, DType dtype,
    const std::function<bool(const std::string&)>& has_tensor) {
  const std::string_view suffix = ValueSuffix(codec);
  if (name.size() <= suffix.size() || !name.ends_with(suffix)) return std::nullopt;
  std::string module(name.substr(0, name.size() - suffix.size()));
  if (suffix != ".weight") return module;
  const bool one_byte = dtype == DType::kF8E4M3 || dtype == DType::kI8 || dtype == DType::kU8;
  if (one_byte || has_tensor(module + ".weight_scale")) return module;
  return std::nullopt;
}

bool IsQuantAuxName(const WeightCodec& codec, std::string_view name) {
  for (std::string_view suffix : codec.suffixes().subspan(1)) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) return true;
  }
  return false;
}

}  // namespace spk
