// The quantization_config a side file beside config.json stands for (SideFileQuantizationConfig,
// source/source_decode.h), read the way its producers' loaders read it:
//
//   hf_quant_config.json (ModelOpt up to 0.29): as it is; the modelopt format reads both shapes.
//   quantize_config.json (AutoGPTQ, GPTQModel) and quant_config.json (AutoAWQ before it wrote
//   config.json's quantization_config): GPTQModel's QuantizeConfig.from_quant_config and AutoAWQ's
//   AwqConfig.to_transformers_dict give the same translation for the keys the decode reads:
//   quant_method (absent: "gptq" in quantize_config.json, as AutoGPTQ and GPTQModel default it,
//   unless AutoAWQ's own keys are there; "awq" in quant_config.json), AutoAWQ's w_bit as bits,
//   q_group_size as group_size, version lower-cased ("GEMM" -> "gemm"); every other key
//   (group_size, desc_act, sym, checkpoint_format, format, zero_point, true_sequential,
//   model_file_base_name, ...) is kept as it is, for the gptq and awq formats
//   (source_gptq.cc) to read and refuse exactly as in config.json.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include "safetensors/json_util.h"
#include "source/source_decode.h"

namespace spk {
namespace {

using Json = nlohmann::ordered_json;

// AutoAWQ's names for what transformers' AwqConfig calls bits and group_size.
constexpr std::array<std::pair<const char*, const char*>, 2> kAwqSynonyms = {
    {{"w_bit", "bits"}, {"q_group_size", "group_size"}}};

// Keys only AutoAWQ's quant_config.json writes (AwqConfig.to_dict).
constexpr std::array<const char*, 4> kAutoAwqKeys = {"w_bit", "q_group_size", "zero_point",
                                                     "version"};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Status Refuse(std::string_view dir, std::string_view file, const std::string& why) {
  return Status::InvalidInput(fmt::format(
      "{}/{}: {}; config.json has no quantization_config, so this file describes the checkpoint's "
      "quantization: fix it, or add the quantization_config its producer writes to config.json",
      dir, file, why));
}

Result<std::string> MethodOf(std::string_view dir, std::string_view file, const Json& side) {
  if (auto m = side.find("quant_method"); m != side.end() && !m->is_null()) {
    if (!m->is_string()) {
      return Refuse(dir, file, fmt::format("quant_method {} is not a string", m->dump()));
    }
    const std::string method = Lower(m->get<std::string>());
    if (method != "gptq" && method != "awq") {
      return Refuse(dir, file,
                    fmt::format("quant_method {}: only gptq and awq are read from {}",
                                m->get<std::string>(), file));
    }
    return method;
  }
  if (file == "quant_config.json") return std::string("awq");
  const bool autoawq = std::any_of(kAutoAwqKeys.begin(), kAutoAwqKeys.end(),
                                   [&](const char* key) { return side.contains(key); });
  return std::string(autoawq ? "awq" : "gptq");
}

}  // namespace

Result<nlohmann::ordered_json> SideFileQuantizationConfig(std::string_view dir,
                                                          std::string_view file,
                                                          std::string_view text) {
  SPK_ASSIGN_OR_RETURN(Json side, ParseJsonStrict(fmt::format("{}/{}", dir, file), text));
  if (!side.is_object()) {
    return Status::InvalidInput(
        fmt::format("{}/{}: not a JSON object; config.json has no quantization_config, so this "
                    "file describes the checkpoint's quantization: fix or remove it",
                    dir, file));
  }
  if (file == kHfQuantConfigFile) return side;
  SPK_ASSIGN_OR_RETURN(std::string method, MethodOf(dir, file, side));
  // AutoGPTQ 0.6 wrote is_marlin_format (false for its own layout); GPTQModel refuses the key.
  if (auto marlin = side.find("is_marlin_format"); marlin != side.end()) {
    if (*marlin != false) {
      return Refuse(dir, file,
                    fmt::format("is_marlin_format {}: AutoGPTQ's Marlin layout is not decoded "
                                "(only the gptq v1 and gptq_v2 layouts)",
                                marlin->dump()));
    }
  }
  Json qc = {{"quant_method", method}};
  for (const auto& [key, value] : side.items()) {
    if (key == "quant_method" || key == "is_marlin_format") continue;
    std::string name = key;
    if (method == "awq") {
      for (const auto& [synonym, canonical] : kAwqSynonyms) {
        if (key != synonym) continue;
        if (auto other = side.find(canonical); other != side.end() && *other != value) {
          return Refuse(dir, file,
                        fmt::format("{} {} but {} {}: which one the weights follow is "
                                    "unclear",
                                    synonym, value.dump(), canonical, other->dump()));
        }
        name = canonical;
      }
    }
    if (name == "version" && value.is_string()) {
      qc[name] = Lower(value.get<std::string>());
    } else {
      qc[name] = value;
    }
  }
  // What the decode cannot take from the tensors: the width of the packed codes, and AWQ's groups
  // (GPTQ's g_idx places every input column).
  std::vector<std::string> required = {"bits"};
  if (method == "awq") required.push_back("group_size");
  for (const std::string& key : required) {
    auto it = qc.find(key);
    if (it == qc.end() || it->is_null()) {
      const char* synonym = key == "bits" ? "w_bit" : "q_group_size";
      return Refuse(dir, file,
                    method == "awq"
                        ? fmt::format("no {} (AutoAWQ's {}): the awq weights cannot be decoded "
                                      "without it",
                                      key, synonym)
                        : fmt::format("no {}: the gptq weights cannot be decoded without it", key));
    }
  }
  return qc;
}

}  // namespace spk
