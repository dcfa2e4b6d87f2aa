#include "model/quant_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace spk {
namespace {

using Json = nlohmann::ordered_json;

// Keys of QuantizationArgs that every release from 0.11 to 0.20 accepts.
constexpr std::array<std::string_view, 12> kPortableWeightKeys = {
    "num_bits", "type",     "symmetric", "group_size",      "strategy", "block_structure",
    "dynamic",  "actorder", "observer",  "observer_kwargs", "zp_dtype", "scale_dtype"};
// Of those, the ones that only newer releases know (older ones fail with "extra fields not
// permitted").
constexpr std::array<std::string_view, 2> kNewOnlyWeightKeys = {"zp_dtype", "scale_dtype"};

Result<WeightQuantArgs> ParseWeights(std::string_view file, const std::string& group, const Json& w,
                                     std::vector<std::string>* unknown) {
  WeightQuantArgs args;
  auto field = [&](const char* key) -> const Json* {
    auto it = w.find(key);
    return it == w.end() || it->is_null() ? nullptr : &*it;
  };
  auto bad = [&](const char* key, const char* want) {
    return Status::InvalidInput(fmt::format(
        "{}: quantization_config.config_groups.{}.weights.{} must be {}", file, group, key, want));
  };
  if (const Json* v = field("num_bits")) {
    if (!v->is_number_integer()) return bad("num_bits", "an integer");
    args.num_bits = v->get<int>();
  }
  if (const Json* v = field("symmetric")) {
    if (!v->is_boolean()) return bad("symmetric", "true or false");
    args.symmetric = v->get<bool>();
  }
  if (const Json* v = field("group_size")) {
    if (!v->is_number_integer()) return bad("group_size", "an integer or null");
    args.group_size = v->get<int64_t>();
  }
  if (const Json* v = field("strategy")) {
    if (!v->is_string()) return bad("strategy", "a string");
    args.strategy = v->get<std::string>();
  }
  if (const Json* v = field("type")) {
    if (!v->is_string()) return bad("type", "a string");
    args.type = v->get<std::string>();
  }
  for (const auto& [key, value] : w.items()) {
    bool portable = std::find(kPortableWeightKeys.begin(), kPortableWeightKeys.end(), key) !=
                    kPortableWeightKeys.end();
    bool new_only = std::find(kNewOnlyWeightKeys.begin(), kNewOnlyWeightKeys.end(), key) !=
                    kNewOnlyWeightKeys.end();
    if (!portable || new_only) unknown->push_back(key);
  }
  return args;
}

Status ReadStringList(std::string_view file, const Json& obj, const char* key,
                      std::vector<std::string>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) {
    return Status::InvalidInput(
        fmt::format("{}: quantization_config {} must be a list", file, key));
  }
  for (const Json& e : *it) {
    if (!e.is_string()) {
      return Status::InvalidInput(
          fmt::format("{}: quantization_config {} must hold strings only", file, key));
    }
    out->push_back(e.get<std::string>());
  }
  return Status::Ok();
}

std::string StringOr(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

namespace {

// compressed-tensors' QuantizationArgs with every key at its default, in the order its
// model_dump writes them, then `fields` over it (the rows' activation arguments).
Json QuantizationArgs(const Json& fields) {
  Json args = {{"actorder", nullptr},
               {"block_structure", nullptr},
               {"dynamic", false},
               {"group_size", nullptr},
               {"num_bits", 8},
               {"observer", nullptr},
               {"observer_kwargs", Json::object()},
               {"scale_dtype", nullptr},
               {"strategy", "tensor"},
               {"symmetric", true},
               {"type", "int"},
               {"zp_dtype", nullptr}};
  for (const auto& [key, value] : fields.items()) args[key] = value;
  return args;
}

Json WeightArgs(const QuantScheme& scheme, int64_t group_size) {
  const bool grouped = scheme.strategy != WeightStrategy::kBlock && group_size != kChannelWise;
  Json weights = {
      {"actorder", nullptr},
      {"block_structure",
       scheme.strategy == WeightStrategy::kBlock ? Json::array({128, 128}) : Json(nullptr)},
      {"dynamic", false},
      {"group_size", grouped ? Json(group_size) : Json(nullptr)},
      {"num_bits", scheme.bits},
      {"observer", scheme.observer.empty() ? Json(nullptr) : Json(scheme.observer)},
      {"observer_kwargs", Json::object()},
      {"strategy", StrategyName(scheme.strategy, group_size)},
      {"symmetric", scheme.symmetric},
      {"type", WeightTypeName(scheme.type)},
  };
  // The rows written as model_free_ptq writes them carry its scale_dtype and zp_dtype keys, which
  // only compressed-tensors releases that know these formats accept; the original int rows stay
  // readable by older releases without them.
  if (WritesReferenceConfig(scheme)) {
    weights = QuantizationArgs(weights);
    const std::string_view scale = ScaleDTypeName(scheme.scale_dtype);
    weights["scale_dtype"] = scale.empty() ? Json(nullptr) : Json(scale);
    // QuantizationArgs serializes zp_dtype as null when symmetric, else the dtype its validator
    // picks: torch.int8 for int weights of up to 8 bits (quant_args.py pytorch_dtype).
    if (!scheme.symmetric && scheme.type == WeightType::kInt) weights["zp_dtype"] = "torch.int8";
  }
  return weights;
}

// The key of config.json's one config group: the row's QuantScheme::config_group, or for the rows
// named as model_free_ptq names them (validate.py validate_config), the preset string at the
// preset's group size and "config_group_0" for the QuantizationScheme object of any other.
std::string ConfigGroupName(const QuantScheme& scheme, int64_t group_size) {
  if (!scheme.config_group.empty()) return std::string(scheme.config_group);
  const bool preset = !scheme.preset.empty() && group_size == scheme.default_group_size;
  return preset ? std::string(scheme.preset) : "config_group_0";
}

}  // namespace

Json MakeQuantizationConfig(const QuantScheme& scheme, int64_t group_size,
                            const std::vector<std::string>& ignore) {
  Json activations = nullptr;
  if (!scheme.input_activations.empty()) {
    activations = QuantizationArgs(Json::parse(scheme.input_activations));
  }
  Json group = {{"format", scheme.format},
                {"input_activations", activations},
                {"output_activations", nullptr},
                {"targets", Json::array({"Linear"})},
                {"weights", WeightArgs(scheme, group_size)}};
  return Json{{"config_groups", {{ConfigGroupName(scheme, group_size), group}}},
              {"format", scheme.format},
              {"global_compression_ratio", nullptr},
              {"ignore", ignore},
              {"kv_cache_scheme", nullptr},
              {"quant_method", "compressed-tensors"},
              {"quantization_status", "compressed"},
              {"sparsity_config", Json::object()},
              {"transform_config", Json::object()},
              {"version", kCompressedTensorsVersion}};
}

Result<QuantizationConfigView> ParseQuantizationConfig(std::string_view file,
                                                       const Json& config_json) {
  auto qc = config_json.find("quantization_config");
  if (qc == config_json.end() || !qc->is_object()) {
    return Status::InvalidInput(fmt::format("{}: no quantization_config object", file));
  }
  QuantizationConfigView view;
  view.quant_method = StringOr(*qc, "quant_method");
  view.format = StringOr(*qc, "format");
  SPK_RETURN_IF_ERROR(ReadStringList(file, *qc, "ignore", &view.ignore));
  auto groups = qc->find("config_groups");
  if (groups == qc->end() || !groups->is_object()) return view;
  for (const auto& [name, g] : groups->items()) {
    if (!g.is_object()) {
      return Status::InvalidInput(
          fmt::format("{}: quantization_config.config_groups.{} must be an object", file, name));
    }
    ConfigGroup group;
    group.name = name;
    group.format = StringOr(g, "format");
    SPK_RETURN_IF_ERROR(ReadStringList(file, g, "targets", &group.targets));
    auto w = g.find("weights");
    if (w != g.end() && w->is_object()) {
      SPK_ASSIGN_OR_RETURN(group.weights, ParseWeights(file, name, *w, &view.unknown_weight_keys));
      group.weights->format = group.format.empty() ? view.format : group.format;
    }
    auto in = g.find("input_activations");
    group.has_input_activations = in != g.end() && !in->is_null();
    view.groups.push_back(std::move(group));
  }
  return view;
}

const QuantScheme* FindSchemeFor(const WeightQuantArgs& args) {
  return FindSchemeFor(args.format, args.type, args.num_bits, args.symmetric, args.strategy);
}

namespace {
std::string Grouping(int64_t group_size) {
  return group_size == kChannelWise ? std::string(" (channel)")
                                    : fmt::format(" (group {})", group_size);
}
}  // namespace

std::string SchemeLabel(const QuantScheme& scheme, int64_t group_size) {
  if (scheme.strategy == WeightStrategy::kBlock)
    return std::string(scheme.name) + " (128x128 blocks)";
  return std::string(scheme.name) + Grouping(group_size);
}

std::string SchemeLabel(const WeightQuantArgs& args) {
  const int64_t group_size = args.group_size.value_or(kChannelWise);
  if (const QuantScheme* scheme = FindSchemeFor(args)) return SchemeLabel(*scheme, group_size);
  const bool grouped = args.strategy == "group" || args.strategy == "channel";
  return fmt::format("{} {}-bit{}{}, not a sparkulator scheme", args.type, args.num_bits,
                     args.symmetric ? "" : " asymmetric",
                     grouped ? Grouping(group_size) : fmt::format(" ({})", args.strategy));
}

Result<CheckpointScheme> SchemeFromConfig(const std::string& file_label,
                                          const ModelConfig& config) {
  SPK_ASSIGN_OR_RETURN(QuantizationConfigView qc, ParseQuantizationConfig(file_label, config.json));
  for (const ConfigGroup& g : qc.groups) {
    if (!g.weights) continue;
    const WeightQuantArgs& w = *g.weights;
    const QuantScheme* scheme = FindSchemeFor(w);
    if (scheme == nullptr) {
      return Status::InvalidInput(fmt::format(
          "{}: config group {} has weights format '{}' type '{}' num_bits {} strategy '{}'; only "
          "the schemes {} are supported",
          file_label, g.name, w.format, w.type, w.num_bits, w.strategy, SchemeNames()));
    }
    // Blocks are 128 columns wide (block_structure [128, 128]); the params carry the width.
    const int64_t group_size = w.strategy == "channel" ? kChannelWise
                               : w.strategy == "block" ? 128
                                                       : w.group_size.value_or(0);
    const QuantParams params = ParamsFor(*scheme, group_size);
    SPK_RETURN_IF_ERROR(ValidateParams(params).WithContext(file_label));
    return CheckpointScheme{scheme, params};
  }
  return Status::InvalidInput(
      fmt::format("{}: quantization_config has no config group with weights", file_label));
}

}  // namespace spk
