#include "model/model_config.h"

#include <fmt/format.h>

namespace spk {
namespace {

using Json = nlohmann::ordered_json;

// Reads an optional integer field; a present field of the wrong type is an error (a config that
// says "num_hidden_layers": "six" would otherwise silently change the layer offset).
Status ReadOptionalInt(const Json& obj, const char* key, std::string_view file,
                       std::optional<int64_t>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer()) {
    return Status::InvalidInput(
        fmt::format("{}: '{}' must be an integer, found {}", file, key, it->type_name()));
  }
  *out = it->get<int64_t>();
  return Status::Ok();
}

Status ReadOptionalString(const Json& obj, const char* key, std::string_view file,
                          std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) {
    return Status::InvalidInput(
        fmt::format("{}: '{}' must be a string, found {}", file, key, it->type_name()));
  }
  *out = it->get<std::string>();
  return Status::Ok();
}

Status ReadDFlashConfig(const Json& obj, std::string_view file, ModelConfig* config) {
  auto it = obj.find("dflash_config");
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) {
    return Status::InvalidInput(fmt::format("{}: 'dflash_config' must be an object", file));
  }
  config->has_dflash_config = true;
  if (!config->num_target_layers) {
    SPK_RETURN_IF_ERROR(
        ReadOptionalInt(*it, "num_target_layers", file, &config->num_target_layers));
  }
  auto ids = it->find("target_layer_ids");
  if (ids == it->end() || ids->is_null()) return Status::Ok();
  if (!ids->is_array()) {
    return Status::InvalidInput(
        fmt::format("{}: 'dflash_config.target_layer_ids' must be a list of integers", file));
  }
  for (const Json& id : *ids) {
    if (!id.is_number_integer()) {
      return Status::InvalidInput(
          fmt::format("{}: 'dflash_config.target_layer_ids' must hold integers only", file));
    }
    config->dflash_target_layer_ids.push_back(id.get<int64_t>());
  }
  return Status::Ok();
}

Status ReadArchitectures(const Json& obj, std::string_view file, ModelConfig* config) {
  auto it = obj.find("architectures");
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) {
    return Status::InvalidInput(fmt::format("{}: 'architectures' must be a list of strings", file));
  }
  for (const Json& a : *it) {
    if (!a.is_string()) {
      return Status::InvalidInput(fmt::format("{}: 'architectures' must hold strings only", file));
    }
    config->architectures.push_back(a.get<std::string>());
  }
  return Status::Ok();
}

}  // namespace

std::string_view TorchDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return "bfloat16";
    case DType::kF16:
      return "float16";
    case DType::kF32:
      return "float32";
    default:
      return "";
  }
}

Result<ModelConfig> ParseModelConfig(std::string_view file_label, std::string_view json_text) {
  ModelConfig config;
  config.json = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (config.json.is_discarded()) {
    return Status::InvalidInput(
        fmt::format("{}: not valid JSON; restore the model's original config.json", file_label));
  }
  if (!config.json.is_object()) {
    return Status::InvalidInput(fmt::format("{}: must be a JSON object", file_label));
  }
  const Json& j = config.json;
  SPK_RETURN_IF_ERROR(ReadArchitectures(j, file_label, &config));
  SPK_RETURN_IF_ERROR(ReadOptionalString(j, "model_type", file_label, &config.model_type));
  SPK_RETURN_IF_ERROR(
      ReadOptionalInt(j, "num_hidden_layers", file_label, &config.num_hidden_layers));
  SPK_RETURN_IF_ERROR(ReadOptionalInt(j, "hidden_size", file_label, &config.hidden_size));
  // A speculators-format draft (EAGLE-3 from speculators) keeps its decoder's config in
  // transformer_layer_config, which vLLM builds the draft from: its hidden_size is the draft's.
  if (auto layer = j.find("transformer_layer_config");
      !config.hidden_size && layer != j.end() && layer->is_object()) {
    SPK_RETURN_IF_ERROR(ReadOptionalInt(*layer, "hidden_size",
                                        fmt::format("{}: transformer_layer_config", file_label),
                                        &config.hidden_size));
  }
  SPK_RETURN_IF_ERROR(ReadOptionalInt(j, "vocab_size", file_label, &config.vocab_size));
  SPK_RETURN_IF_ERROR(
      ReadOptionalInt(j, "num_target_layers", file_label, &config.num_target_layers));
  SPK_RETURN_IF_ERROR(
      ReadOptionalInt(j, "num_nextn_predict_layers", file_label, &config.num_nextn_predict_layers));
  SPK_RETURN_IF_ERROR(ReadDFlashConfig(j, file_label, &config));
  SPK_RETURN_IF_ERROR(
      ReadOptionalString(j, "speculators_model_type", file_label, &config.speculators_model_type));
  SPK_RETURN_IF_ERROR(ReadOptionalString(j, "torch_dtype", file_label, &config.torch_dtype));
  if (config.torch_dtype.empty()) {
    SPK_RETURN_IF_ERROR(ReadOptionalString(j, "dtype", file_label, &config.torch_dtype));
  }
  auto q = j.find("quantization_config");
  config.has_quantization_config = q != j.end() && !q->is_null();
  return config;
}

}  // namespace spk
