// TargetPrecision: the spellings a user writes and the quantization configs a target carries, both
// read into one weight number format (model/target_precision.h).
#include "model/target_precision.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

#include "model/quant_config.h"

namespace spk {
namespace {

using json = nlohmann::ordered_json;

TargetPrecision Unquantized() { return {}; }
TargetPrecision Quantized(WeightType type, int bits) { return {true, type, bits}; }
TargetPrecision QuantizedUnknown() { return {true, std::nullopt, 0}; }

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The dense dtypes a user may name for an unquantized target.
constexpr std::array<std::string_view, 9> kDenseNames = {
    "unquantized", "bf16", "bfloat16", "f16", "fp16", "float16", "f32", "fp32", "float32"};

// "int4", "fp8", "fp4": a format by its own name, or the float formats' names (nvfp4, mxfp4,
// mxfp8) without a scheme's activation suffix.
std::optional<TargetPrecision> ParseFormatName(std::string_view name) {
  if (name == "fp8" || name == "mxfp8") return Quantized(WeightType::kFloat, 8);
  if (name == "fp4" || name == "nvfp4" || name == "mxfp4") return Quantized(WeightType::kFloat, 4);
  if (name.size() == 4 && name.starts_with("int") && name[3] >= '2' && name[3] <= '8') {
    return Quantized(WeightType::kInt, name[3] - '0');
  }
  return std::nullopt;
}

int IntOr(const json& object, std::initializer_list<const char*> keys, int fallback) {
  for (const char* key : keys) {
    auto it = object.find(key);
    if (it != object.end() && it->is_number_integer()) return it->get<int>();
  }
  return fallback;
}

// ModelOpt's quant_algo ("FP8", "NVFP4", "W4A16_NVFP4", "INT4_AWQ", "W4A8_AWQ", "INT8_SQ", ...):
// the weights' format; MIXED_PRECISION and the unknown ones leave it open.
TargetPrecision ModeloptPrecision(const json& quantization) {
  auto algo = quantization.find("quant_algo");
  if (algo == quantization.end() || !algo->is_string()) return QuantizedUnknown();
  const std::string a = Lower(algo->get<std::string>());
  if (a.find("nvfp4") != std::string::npos || a.find("mxfp4") != std::string::npos) {
    return Quantized(WeightType::kFloat, 4);
  }
  if (a.starts_with("fp8") || a.find("mxfp8") != std::string::npos) {
    return Quantized(WeightType::kFloat, 8);
  }
  if (a.starts_with("int4") || a.starts_with("w4a")) return Quantized(WeightType::kInt, 4);
  if (a.starts_with("int8")) return Quantized(WeightType::kInt, 8);
  return QuantizedUnknown();
}

TargetPrecision CompressedTensorsPrecision(const ModelConfig& config) {
  auto qc = ParseQuantizationConfig("config.json", config.json);
  if (!qc.ok()) return QuantizedUnknown();
  for (const ConfigGroup& g : qc->groups) {
    if (!g.weights) continue;
    if (g.weights->type == "float") return Quantized(WeightType::kFloat, g.weights->num_bits);
    if (g.weights->type == "int") return Quantized(WeightType::kInt, g.weights->num_bits);
  }
  return QuantizedUnknown();
}

}  // namespace

std::string TargetPrecision::Name() const {
  if (!quantized) return "unquantized";
  if (!type) return "quantized";
  return fmt::format("{}{}", *type == WeightType::kInt ? "int" : "fp", bits);
}

bool TargetPrecision::Satisfies(const TargetPrecision& expected) const {
  if (quantized != expected.quantized) return false;
  if (!quantized || !type || !expected.type) return true;
  return *type == *expected.type && bits == expected.bits;
}

Result<TargetPrecision> ParseTargetPrecision(std::string_view text) {
  const std::string name = Lower(text);
  if (std::find(kDenseNames.begin(), kDenseNames.end(), name) != kDenseNames.end()) {
    return Unquantized();
  }
  if (auto format = ParseFormatName(name)) return *format;
  if (const QuantScheme* scheme = FindScheme(name)) return Quantized(scheme->type, scheme->bits);
  return Status::Usage(fmt::format(
      "--target-precision '{}' is not a precision: give unquantized (or bf16, f16, f32), a weight "
      "format (int4, int8, fp8, fp4, nvfp4, mxfp4) or a scheme name (w4a16, fp8_dynamic, nvfp4a16, "
      "...)",
      text));
}

TargetPrecision TargetPrecisionOf(const ModelConfig& config, const json* side_quant_config) {
  if (!config.has_quantization_config) {
    if (side_quant_config != nullptr && side_quant_config->is_object()) {
      return ModeloptPrecision(*side_quant_config);
    }
    return Unquantized();
  }
  const json& qc = config.json["quantization_config"];
  auto method_it = qc.find("quant_method");
  const std::string method =
      method_it != qc.end() && method_it->is_string() ? Lower(method_it->get<std::string>()) : "";
  if (method == "compressed-tensors") return CompressedTensorsPrecision(config);
  if (method == "fp8" || method == "fbgemm_fp8") return Quantized(WeightType::kFloat, 8);
  if (method == "mxfp4") return Quantized(WeightType::kFloat, 4);
  if (method == "modelopt") return ModeloptPrecision(qc);
  if (method == "gptq" || method == "awq" || method == "gptq_marlin" || method == "awq_marlin") {
    return Quantized(WeightType::kInt, IntOr(qc, {"bits", "w_bit"}, 4));
  }
  return QuantizedUnknown();
}

}  // namespace spk
