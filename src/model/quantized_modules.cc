#include "model/quantized_modules.h"
#include "quant/stored_names.h"

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
  if (suffix != kWeightSuffix) return module;
  const bool one_byte = dtype == DType::kF8E4M3 || dtype == DType::kI8 || dtype == DType::kU8;
  if (one_byte || has_tensor(module + std::string(kScaleSuffix))) return module;
  return std::nullopt;
}

bool IsQuantAuxName(const WeightCodec& codec, std::string_view name) {
  for (std::string_view suffix : codec.suffixes().subspan(1)) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) return true;
  }
  return false;
}

DType WeightDTypeOfScales(DType scale_dtype) {
  return IsQuantizableFloat(scale_dtype) ? scale_dtype : DType::kBF16;
}

std::optional<std::pair<int64_t, int64_t>> WeightDimsFromValues(
    const WeightCodec& codec, const QuantParams& p, DType dtype,
    const std::vector<int64_t>& values_shape) {
  if (values_shape.size() != 2) return std::nullopt;
  const int64_t rows = values_shape[0];
  for (int64_t per_element : {1, 2}) {
    const int64_t cols = values_shape[1] * per_element;
    if (!codec.Validate(p, dtype, rows, cols).ok()) continue;
    const auto tensors = codec.Tensors(p, dtype, rows, cols);
    const StoredTensor* values = FindRole(tensors, TensorRole::kPacked);
    if (values && values->shape == values_shape) return std::pair{rows, cols};
  }
  return std::nullopt;
}

}  // namespace spk
