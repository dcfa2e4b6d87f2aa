#include "quant/codec.h"

#include <fmt/format.h>

namespace spk {

std::string_view QuantMethodName(QuantMethod method) {
  return method == QuantMethod::kSearch ? "search" : "rtn";
}

Result<QuantMethod> ParseQuantMethod(std::string_view name) {
  for (QuantMethod m : {QuantMethod::kRtn, QuantMethod::kSearch}) {
    if (name == QuantMethodName(m)) return m;
  }
  return Status::Usage("unknown --method '" + std::string(name) + "': use rtn or search");
}

Status ValidateWeight(const QuantParams& p, DType weight_dtype, int64_t rows, int64_t cols,
                      bool partial_groups) {
  SPK_RETURN_IF_ERROR(ValidateParams(p));
  if (!IsQuantizableFloat(weight_dtype)) {
    return Status::InvalidInput(fmt::format(
        "weight dtype {} cannot be quantized (BF16, F16 or F32 only)", DTypeName(weight_dtype)));
  }
  if (rows <= 0 || cols <= 0 || (!partial_groups && !GroupFits(cols, p.group_size))) {
    return Status::InvalidInput(fmt::format(
        "a [{}, {}] weight cannot be stored with group size {}: the columns must be a positive "
        "multiple of it",
        rows, cols, p.group_size));
  }
  return Status::Ok();
}

const StoredTensor* FindRole(std::span<const StoredTensor> tensors, TensorRole role) {
  for (const StoredTensor& t : tensors) {
    if (t.role == role) return &t;
  }
  return nullptr;
}

}  // namespace spk
