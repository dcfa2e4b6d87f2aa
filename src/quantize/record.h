// What `quantize` records about itself in the output's config.json, under the "sparkulator" key
// (outside quantization_config: older compressed-tensors releases reject unknown QuantizationArgs).
//
// The record is what a reader of the checkpoint cannot recover from the tensors alone: the source
// it came from, the scheme, group and method, the target precision a draft pairs with (`check
// --target` reads it), the family, sizes before and after, and each Linear module kept dense with
// its reason. `sparkulator card` writes the model card from it. Ownership: values. Thread safety:
// pure functions. Error policy: cannot fail.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>

#include "plan/plan.h"
#include "quantize/quantize.h"

namespace spk {

nlohmann::ordered_json QuantizeRecord(const QuantizeOptions& options, const QuantPlan& plan,
                                      int64_t group_size, uint64_t source_tensor_bytes,
                                      uint64_t output_tensor_bytes);

}  // namespace spk
