// A Hugging Face model folder's config.json, as far as sparkulator needs it: the fields that decide
// the draft family, vLLM's module naming (the draft's layer offset) and whether the model is
// already quantized. The full JSON is kept so that `quantize` writes every key back unchanged.
//
// Ownership: ModelConfig is a value. Thread safety: immutable after parsing.
// Errors: ParseModelConfig returns InvalidInput naming the file for malformed JSON or wrongly typed
// fields that sparkulator relies on; unknown keys are kept and never an error.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"

namespace spk {

struct ModelConfig {
  nlohmann::ordered_json json;  // the whole file, key order preserved
  std::vector<std::string> architectures;
  std::string model_type;
  std::optional<int64_t> num_hidden_layers;
  std::optional<int64_t> hidden_size;
  std::optional<int64_t> vocab_size;
  // Layers of the target model a draft is attached to (top-level or
  // dflash_config.num_target_layers).
  std::optional<int64_t> num_target_layers;
  bool has_dflash_config = false;
  std::vector<int64_t> dflash_target_layer_ids;
  std::string speculators_model_type;  // "eagle3" for speculators-format EAGLE-3 heads
  bool has_quantization_config = false;
  std::string torch_dtype;                          // "bfloat16", ... or empty
  std::optional<int64_t> num_nextn_predict_layers;  // DeepSeek MTP
};

// config.json's torch_dtype spelling of BF16, F16 and F32 ("bfloat16", "float16", "float32"); ""
// for the other dtypes. String literals, so data() is NUL-terminated.
std::string_view TorchDTypeName(DType dtype);

// Parses config.json text. `file_label` (the path) is used in messages.
Result<ModelConfig> ParseModelConfig(std::string_view file_label, std::string_view json_text);

}  // namespace spk
