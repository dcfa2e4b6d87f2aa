// The precision of the target model a draft was trained against: what `quantize --target-precision`
// takes, what config.json's "sparkulator".target_precision records, and what `check --target`
// reads off the target's own quantization config to catch a cross-paired draft (~0% acceptance
// with correct output).
//
// A precision is the target's weight number format: unquantized, or a type and a width ("int4",
// "fp8", "fp4"). The spellings users write are names of that: a dense dtype ("bf16"), a format
// ("fp8", "int4"), or a scheme of the table (quant/scheme.h: "w4a16" is int4, "nvfp4" fp4), so an
// fp8-trained draft matches any FP8 target (HF fp8 blocks, compressed-tensors FP8_DYNAMIC,
// ModelOpt FP8) and a w4a16-trained one a GPTQ int4 target. Activation precision is not compared.
//
// Value types, no ownership. Errors: ParseTargetPrecision returns Usage listing the spellings.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "model/model_config.h"
#include "quant/scheme.h"

namespace spk {

struct TargetPrecision {
  bool quantized = false;
  // For a quantized target: its weights' type and bits, when known (a quant method sparkulator
  // cannot read the width of leaves them unset; such a target matches any quantized expectation).
  std::optional<WeightType> type;
  int bits = 0;

  // "unquantized", "int4", "fp8", "fp4", or "quantized" when the format is unknown.
  std::string Name() const;
  // The draft's expectation `expected` holds for a target of this precision.
  bool Satisfies(const TargetPrecision& expected) const;
};

// "unquantized" (or a dense dtype: bf16, bfloat16, f16, fp16, float16, f32, fp32, float32), a
// format (int2..int8, fp8, fp4, nvfp4, mxfp4, mxfp8), or a scheme name, preset or alias of the
// table; case ignored.
Result<TargetPrecision> ParseTargetPrecision(std::string_view text);

// The precision of a target whose config.json is `config`: its quantization_config's weights
// (compressed-tensors config groups, HF fp8, GPTQ/AWQ bits, ModelOpt quant_algo, mxfp4), or
// `side_quant_config` (hf_quant_config.json's "quantization" object, ModelOpt up to 0.29) when
// config.json has none; unquantized when neither says otherwise.
TargetPrecision TargetPrecisionOf(const ModelConfig& config,
                                  const nlohmann::ordered_json* side_quant_config = nullptr);

}  // namespace spk
