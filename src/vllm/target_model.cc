#include "vllm/target_model.h"

#include <fmt/format.h>

#include "source/source.h"

namespace spk {
namespace {

// ModelOpt up to 0.29 writes its quantization beside config.json: hf_quant_config.json's
// "quantization" object, when config.json has no quantization_config and the file is there.
Result<std::optional<nlohmann::ordered_json>> SideQuantConfig(FileSystem* fs,
                                                              const std::string& dir,
                                                              const ModelConfig& config) {
  const std::string path = dir + "/hf_quant_config.json";
  if (config.has_quantization_config || fs->KindOf(path) != FileKind::kFile) {
    return std::optional<nlohmann::ordered_json>();
  }
  SPK_ASSIGN_OR_RETURN(std::string text, fs->ReadFile(path));
  auto parsed = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object() || !parsed.contains("quantization") ||
      !parsed["quantization"].is_object()) {
    return Status::InvalidInput(path + ": not JSON with a \"quantization\" object");
  }
  return std::optional<nlohmann::ordered_json>(parsed["quantization"]);
}

// "w4a16 (group 128)"-like label of a config's quantization, or "unquantized (<dtype>)".
std::string PrecisionOf(const ModelConfig& config,
                        const std::optional<nlohmann::ordered_json>& side_quant_config) {
  if (side_quant_config) {
    return "modelopt " +
           side_quant_config->value("quant_algo", std::string("(quant_algo unknown)")) +
           " (hf_quant_config.json)";
  }
  if (!config.has_quantization_config) {
    return fmt::format("unquantized ({})",
                       config.torch_dtype.empty() ? "dtype unknown" : config.torch_dtype);
  }
  auto qc = ParseQuantizationConfig("config.json", config.json);
  if (!qc.ok()) return "quantized (unreadable quantization_config)";
  for (const ConfigGroup& g : qc->groups) {
    if (g.weights) return qc->quant_method + " " + SchemeLabel(*g.weights);
  }
  const auto& q = config.json["quantization_config"];
  return q.contains("quant_method") && q["quant_method"].is_string()
             ? q["quant_method"].get<std::string>()
             : "quantized";
}

}  // namespace

Result<TargetModel> LoadTargetModel(FileSystem* fs, const std::string& spec) {
  TargetModel t;
  t.spec = spec;
  SPK_ASSIGN_OR_RETURN(t.dir, ResolveModelPath(fs, spec));
  const std::string path = t.dir + "/config.json";
  SPK_ASSIGN_OR_RETURN(std::string text, fs->ReadFile(path));
  SPK_ASSIGN_OR_RETURN(t.config, ParseModelConfig(path, text));
  SPK_ASSIGN_OR_RETURN(t.side_quant_config, SideQuantConfig(fs, t.dir, t.config));
  t.precision = TargetPrecisionOf(t.config, t.side_quant_config ? &*t.side_quant_config : nullptr);
  t.label = PrecisionOf(t.config, t.side_quant_config);
  if (t.side_quant_config) t.quant_method = "modelopt";
  if (!t.config.has_quantization_config) return t;
  auto qc = ParseQuantizationConfig("config.json", t.config.json);
  if (!qc.ok()) {
    t.quant_method = "(unreadable)";
    return t;
  }
  t.quant_method = qc->quant_method;
  if (qc->quant_method != "compressed-tensors") return t;
  if (auto scheme = SchemeFromConfig("config.json", t.config); scheme.ok()) t.scheme = *scheme;
  if (auto ignore = ParsePatterns(qc->ignore, "the target's ignore"); ignore.ok()) {
    t.ignore = std::move(ignore).value();
  }
  return t;
}

}  // namespace spk
