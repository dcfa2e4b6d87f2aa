#include "vllm/family.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>

#include "base/strings.h"
#include "vllm/module_pattern.h"
#include "vllm/vllm_module_map.h"

namespace spk {
namespace {

bool HasArchitecture(const ModelConfig& config, std::string_view needle) {
  return std::any_of(config.architectures.begin(), config.architectures.end(),
                     [&](const std::string& a) { return a.find(needle) != std::string::npos; });
}

bool AnyNameContains(const std::vector<std::string>& names, std::string_view needle) {
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& n) { return n.find(needle) != std::string::npos; });
}

bool LooksLagunaStyle(const ModelConfig& config, const std::vector<std::string>& names) {
  return HasArchitecture(config, "Laguna") || AnyNameContains(names, "self_attn.qkv_proj.") ||
         AnyNameContains(names, "self_attn.g_proj.");
}

// A speculators-format config whose format the newest map that registers it serves with method
// eagle3. Without any map that registers it, only the format named eagle3 is.
bool IsEagle3SpeculatorsFormat(const ModelConfig& config) {
  if (config.speculators_model_type.empty()) return false;
  const std::vector<ModuleMap>& maps = ModuleMaps();
  for (auto map = maps.rbegin(); map != maps.rend(); ++map) {
    if (const SpeculatorsFormat* format = FindSpeculatorsFormat(*map, config)) {
      return format->method == "eagle3";
    }
  }
  return config.speculators_model_type == "eagle3";
}

FamilyDetection Detect(const ModelConfig& config, const std::vector<std::string>& names) {
  FamilyDetection d;
  if (config.has_dflash_config || HasArchitecture(config, "DFlash")) {
    d.family = ModelFamily::kDFlash;
    d.laguna_style = LooksLagunaStyle(config, names);
    d.reason = config.has_dflash_config ? "config.json has dflash_config"
                                        : "config.json architectures name a DFlash model";
    if (d.laguna_style) d.reason += "; Laguna-style (fused qkv_proj / g_proj in the checkpoint)";
    return d;
  }
  // A speculators format vLLM serves as eagle3 (eagle3; peagle, an EAGLE-3 head that drafts in
  // parallel) is built with the EAGLE-3 classes, so its naming is EAGLE-3's: the newest module
  // map's speculators table says which formats those are.
  if (IsEagle3SpeculatorsFormat(config) || HasArchitecture(config, "Eagle3")) {
    d.family = ModelFamily::kEagle3;
    d.reason =
        !config.speculators_model_type.empty()
            ? fmt::format("config.json speculators_model_type is {}", config.speculators_model_type)
            : "config.json architectures name an EAGLE-3 head";
    return d;
  }
  if (config.num_nextn_predict_layers.value_or(0) > 0 || AnyNameContains(names, ".eh_proj.") ||
      AnyNameContains(names, "mtp.")) {
    d.family = ModelFamily::kMtp;
    d.reason = "MTP layers present (eh_proj / mtp.* / num_nextn_predict_layers)";
    return d;
  }
  d.family = ModelFamily::kLlm;
  d.reason = "no draft markers in config.json or tensor names";
  return d;
}

}  // namespace

std::string_view FamilyName(ModelFamily family) {
  switch (family) {
    case ModelFamily::kLlm:
      return "llm";
    case ModelFamily::kDFlash:
      return "dflash";
    case ModelFamily::kEagle3:
      return "eagle3";
    case ModelFamily::kMtp:
      return "mtp";
  }
  return "llm";
}

Result<Preset> ParsePreset(std::string_view name) {
  for (Preset p : {Preset::kAuto, Preset::kLlm, Preset::kDFlash, Preset::kEagle3, Preset::kMtp,
                   Preset::kNone}) {
    if (PresetName(p) == name) return p;
  }
  return Status::Usage(
      fmt::format("unknown preset '{}': use auto, dflash, eagle3, mtp, llm or none", name));
}

std::string_view PresetName(Preset preset) {
  switch (preset) {
    case Preset::kAuto:
      return "auto";
    case Preset::kLlm:
      return "llm";
    case Preset::kDFlash:
      return "dflash";
    case Preset::kEagle3:
      return "eagle3";
    case Preset::kMtp:
      return "mtp";
    case Preset::kNone:
      return "none";
  }
  return "auto";
}

namespace {

FamilyDetection DetectFamilyOnly(const ModelConfig& config,
                                 const std::vector<std::string>& tensor_names, Preset preset) {
  FamilyDetection detected = Detect(config, tensor_names);
  if (preset == Preset::kAuto) return detected;
  FamilyDetection d;
  d.reason = fmt::format("--preset {} (auto-detection said: {})", PresetName(preset),
                         FamilyName(detected.family));
  switch (preset) {
    case Preset::kDFlash:
      d.family = ModelFamily::kDFlash;
      d.laguna_style = LooksLagunaStyle(config, tensor_names);
      break;
    case Preset::kEagle3:
      d.family = ModelFamily::kEagle3;
      break;
    case Preset::kMtp:
      d.family = ModelFamily::kMtp;
      break;
    case Preset::kNone:
      d.family = detected.family;
      d.family_rules = false;
      break;
    default:
      d.family = ModelFamily::kLlm;
  }
  return d;
}

}  // namespace

bool IsEagle1Layout(const ModelConfig& config, const std::vector<std::string>& tensor_names,
                    const std::vector<std::vector<int64_t>>* shapes) {
  if (config.architectures.size() != 1 || config.architectures[0].starts_with("Eagle") ||
      !config.architectures[0].ends_with("ForCausalLM")) {
    return false;
  }
  bool fc = false;
  for (size_t i = 0; i < tensor_names.size(); ++i) {
    std::string_view name = tensor_names[i];
    if (name.starts_with("model.")) name.remove_prefix(6);
    if (std::optional<int64_t> layer = LayerIndex(name); layer && *layer != 0) return false;
    if (!name.starts_with("fc.weight")) continue;
    fc = true;
    if (shapes == nullptr || name != "fc.weight") continue;
    const std::vector<int64_t>& shape = (*shapes)[i];
    const int64_t h = config.hidden_size.value_or(shape.empty() ? 0 : shape[0]);
    if (shape.size() != 2 || shape[0] != h || shape[1] != 2 * h) return false;
  }
  return fc;
}

FamilyDetection DetectFamily(const ModelConfig& config,
                             const std::vector<std::string>& tensor_names, Preset preset,
                             const std::vector<std::vector<int64_t>>* shapes) {
  FamilyDetection d = DetectFamilyOnly(config, tensor_names, preset);
  if (preset == Preset::kAuto && d.family == ModelFamily::kLlm &&
      IsEagle1Layout(config, tensor_names, shapes)) {
    d.eagle1_layout = true;
    d.reason = "EAGLE-1 layout: one decoder layer and fc [H, 2H] under a " +
               config.architectures[0] + " config";
  }
  d.num_speculative_tokens = NumSpeculativeTokens(d.family, config, &d.speculative_tokens_reason);
  return d;
}

bool IsDraft(ModelFamily family) {
  return family == ModelFamily::kDFlash || family == ModelFamily::kEagle3;
}

std::optional<int64_t> LayerIndex(std::string_view name) {
  static constexpr std::string_view kLayers = "layers.";
  size_t pos = 0;
  while ((pos = name.find(kLayers, pos)) != std::string_view::npos) {
    bool at_boundary = pos == 0 || name[pos - 1] == '.';
    size_t start = pos + kLayers.size();
    size_t end = start;
    while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
    if (at_boundary && end > start && (end == name.size() || name[end] == '.')) {
      int64_t index = 0;
      auto [ptr, ec] = std::from_chars(name.data() + start, name.data() + end, index);
      if (ec == std::errc()) return index;
    }
    pos = start;
  }
  return std::nullopt;
}

std::string VllmNaming::ToString() const {
  std::string s = add_model_prefix ? "prefix 'model.'" : "no prefix";
  if (!proposer_prefix.empty()) {
    s += fmt::format(", served as a draft_model draft under '{}'", proposer_prefix);
  }
  if (map_architecture != nullptr) {
    s +=
        fmt::format(", the names vLLM gives {}'s modules (its module map)", map_architecture->name);
  }
  if (!offset_known) return s + ", draft layer offset unknown (pass --target-layers)";
  return s + fmt::format(", layer offset {}", layer_offset);
}

VllmNaming NamingFor(const FamilyDetection& family, const ModelConfig& config,
                     const std::vector<std::string>& tensor_names,
                     std::optional<int64_t> target_layers) {
  VllmNaming naming;
  bool all_prefixed = std::all_of(tensor_names.begin(), tensor_names.end(), [](const auto& n) {
    return n.starts_with("model.") || n.starts_with("lm_head") || n.starts_with("mtp.");
  });
  if (!IsDraft(family.family) && !family.map_draft) return naming;
  naming.add_model_prefix = !all_prefixed;
  // Laguna-style drafts store their layer keys already offset by the target's layer count; some
  // drafts are numbered from 0 in vLLM too (the module map says which).
  // (A draft that stores a fused qkv_proj but that vLLM numbers after the target's, as the map
  // shows for DFlash2 Beam, is offset all the same.)
  if ((family.laguna_style && !family.map_layers_follow_target) || family.map_no_layer_offset) {
    return naming;
  }
  std::optional<int64_t> first_layer;
  for (const std::string& n : tensor_names) {
    auto idx = LayerIndex(n);
    if (idx && (!first_layer || *idx < *first_layer)) first_layer = idx;
  }
  std::optional<int64_t> target = target_layers ? target_layers : config.num_target_layers;
  if (!target) {
    naming.offset_known = !first_layer.has_value();
    return naming;
  }
  // A checkpoint whose first layer is already past the target's layers was saved offset.
  naming.layer_offset = (first_layer && *first_layer >= *target) ? 0 : *target;
  return naming;
}

namespace {

// Every all-digit component of a dotted name (layer and expert indices), in order: where it
// starts, its length and its value.
struct IndexAt {
  size_t pos = 0;
  size_t len = 0;
  int64_t value = 0;
};
std::vector<IndexAt> Indices(std::string_view name) {
  std::vector<IndexAt> out;
  for (size_t start = 0; start <= name.size();) {
    size_t end = name.find('.', start);
    if (end == std::string_view::npos) end = name.size();
    std::string_view part = name.substr(start, end - start);
    int64_t value = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (!part.empty() && ec == std::errc() && ptr == part.data() + part.size()) {
      out.push_back({start, part.size(), value});
    }
    start = end + 1;
  }
  return out;
}

bool IsShardOf(const MappedArchitecture& arch, std::string_view fused, std::string_view shard) {
  for (const FusedMapping* mapping : {&arch.packed_modules_mapping, &StandardFusedMapping()}) {
    auto it = mapping->find(std::string(fused));
    if (it != mapping->end() &&
        std::find(it->second.begin(), it->second.end(), shard) != it->second.end()) {
      return true;
    }
  }
  return false;
}

// The map's name for `module`, moved to this checkpoint's layer: the tiny model's layer index in
// vLLM's name is the tiny checkpoint's plus the tiny target's layer count, or the same; this
// checkpoint's then gets `shift` added, or nothing. Indices after the layer's (experts) are this
// checkpoint's where the two names have as many. A shard of a module vLLM fuses keeps its own
// leaf unless `fused`. nullopt when the map does not list the module by that name.
std::optional<std::string> NameInMap(const MappedArchitecture& arch, int64_t shift,
                                     std::string_view module, bool fused) {
  auto it = arch.modules.find(NormalizedModuleName(module));
  if (it == arch.modules.end() || it->second.checkpoint_name.empty()) return std::nullopt;
  const MappedModule& m = it->second;
  std::string name = m.vllm_prefix;
  const std::vector<IndexAt> vllm = Indices(name);
  const std::vector<IndexAt> tiny = Indices(m.checkpoint_name);
  const std::vector<IndexAt> real = Indices(module);
  std::vector<int64_t> values;
  for (const IndexAt& v : vllm) values.push_back(v.value);
  if (!values.empty()) {
    if (!tiny.empty() && !real.empty()) {
      values[0] = real[0].value + (vllm[0].value == tiny[0].value ? 0 : shift);
    } else if (arch.layers_follow_target()) {
      values[0] = vllm[0].value - *arch.layer_offset + shift;  // a module outside the layers
    }
    if (vllm.size() == real.size()) {
      for (size_t i = 1; i < vllm.size(); ++i) values[i] = real[i].value;
    }
    for (size_t i = vllm.size(); i-- > 0;) {
      name.replace(vllm[i].pos, vllm[i].len, std::to_string(values[i]));
    }
  }
  if (std::string_view leaf = Leaf(module);
      !fused && leaf != Leaf(name) && IsShardOf(arch, Leaf(name), leaf)) {
    name = fmt::format("{}.{}", Parent(name), leaf);
  }
  return name;
}

}  // namespace

std::string ToVllmModuleName(const VllmNaming& naming, std::string_view checkpoint_module) {
  if (naming.map_architecture != nullptr) {
    if (auto by_map = NameInMap(*naming.map_architecture, naming.map_layer_shift, checkpoint_module,
                                /*fused=*/false)) {
      return naming.proposer_prefix + *by_map;
    }
  }
  std::string name(checkpoint_module);
  // EAGLE-3 speculators checkpoints call their single decoder layer "midlayer".
  if (name.starts_with("midlayer.")) name = "layers.0." + name.substr(9);
  if (naming.layer_offset != 0) {
    if (auto idx = LayerIndex(name)) {
      std::string from = fmt::format("layers.{}.", *idx);
      size_t pos = name.find(from);
      name.replace(pos, from.size(), fmt::format("layers.{}.", *idx + naming.layer_offset));
    }
  }
  if (naming.add_model_prefix && !name.starts_with("model.")) name = "model." + name;
  return naming.proposer_prefix + name;
}

std::string ToFusedVllmModuleName(const VllmNaming& naming, std::string_view checkpoint_module) {
  if (naming.map_architecture != nullptr) {
    if (auto by_map = NameInMap(*naming.map_architecture, naming.map_layer_shift, checkpoint_module,
                                /*fused=*/true)) {
      return naming.proposer_prefix + *by_map;
    }
  }
  return FusedModuleName(ToVllmModuleName(naming, checkpoint_module));
}

std::vector<int64_t> Eagle3DefaultAuxLayers(int64_t layers) {
  std::vector<int64_t> ids;
  for (int64_t id : {int64_t{2}, layers / 2, layers - 3}) {
    if (id >= 0 && id <= layers && std::find(ids.begin(), ids.end(), id) == ids.end()) {
      ids.push_back(id);
    }
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<int64_t> Eagle3AuxLayersFor(int64_t layers) {
  std::vector<int64_t> ids = Eagle3DefaultAuxLayers(layers);
  if (ids.size() == 3) return ids;
  return {layers - 2, layers - 1, layers};
}

namespace {

std::optional<int64_t> PositiveInt(const nlohmann::ordered_json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer() || it->get<int64_t>() <= 0) return std::nullopt;
  return it->get<int64_t>();
}

}  // namespace

std::optional<int> SpeculatorsSpeculativeTokens(const ModelConfig& config) {
  const auto& j = config.json;
  if (!j.contains("speculators_config") || !j["speculators_config"].is_object()) {
    return std::nullopt;
  }
  const auto& methods =
      j["speculators_config"].value("proposal_methods", nlohmann::ordered_json::array());
  if (!methods.is_array() || methods.empty()) return std::nullopt;
  if (auto n = PositiveInt(methods[0], "speculative_tokens")) return static_cast<int>(*n);
  return std::nullopt;
}

int NumSpeculativeTokens(ModelFamily family, const ModelConfig& config, std::string* why) {
  const auto& j = config.json;
  switch (family) {
    case ModelFamily::kDFlash: {
      std::optional<int64_t> block = PositiveInt(j, "block_size");
      if (!block && j.contains("dflash_config"))
        block = PositiveInt(j["dflash_config"], "block_size");
      if (block && *block >= 2) {
        *why = fmt::format("block_size {} - 1 (DFlash drafts the block after its anchor token)",
                           *block);
        return static_cast<int>(*block - 1);
      }
      *why = "block_size not in config.json: 15, for the block of 16 the published drafts use";
      return 15;
    }
    case ModelFamily::kEagle3: {
      if (std::optional<int> n = SpeculatorsSpeculativeTokens(config)) {
        *why = kSpeculatorsTokensReason;
        return *n;
      }
      *why = "EAGLE-3 default: 3 (the head drafts one token per step)";
      return 3;
    }
    case ModelFamily::kMtp:
      *why = "MTP: one token per MTP layer";
      return 1;
    case ModelFamily::kLlm:
      break;
  }
  *why = "not a draft";
  return 0;
}

std::string FusedModuleName(std::string_view vllm_module) {
  size_t dot = vllm_module.rfind('.');
  std::string_view leaf = dot == std::string_view::npos ? vllm_module : vllm_module.substr(dot + 1);
  std::string_view parent = dot == std::string_view::npos ? "" : vllm_module.substr(0, dot + 1);
  for (const auto& [fused, shards] : StandardFusedMapping()) {
    if (std::find(shards.begin(), shards.end(), leaf) != shards.end()) {
      return std::string(parent) + fused;
    }
  }
  return std::string(vllm_module);
}

// MtpLayerPrefix: a layer past the model's own num_hidden_layers (DeepSeek,
// GLM: the MTP layers follow the decoder's), or the layer holding a name component that starts
// with "mtp" (Qwen3-Next's "mtp.", MiMo's "mtp_layers."), else that component.
std::string MtpLayerPrefix(const ModelConfig& config, std::string_view vllm_name) {
  std::optional<int64_t> layer = LayerIndex(vllm_name);
  const std::string marker = layer ? fmt::format("layers.{}.", *layer) : "";
  const size_t layer_at = layer ? vllm_name.find(marker) : std::string_view::npos;
  const std::string layer_prefix = layer_at == std::string_view::npos
                                       ? ""
                                       : std::string(vllm_name.substr(0, layer_at + marker.size()));
  if (!layer_prefix.empty() && config.num_hidden_layers && *layer >= *config.num_hidden_layers) {
    return layer_prefix;
  }
  for (size_t start = 0; start < vllm_name.size();) {
    size_t dot = vllm_name.find('.', start);
    if (dot == std::string_view::npos) break;
    if (vllm_name.substr(start, 3) == "mtp") {
      if (!layer_prefix.empty() && layer_at < start) return layer_prefix;
      return std::string(vllm_name.substr(0, dot + 1));
    }
    start = dot + 1;
  }
  return "";
}

std::optional<MtpLowBitsNote> MtpLayersAtLowBits(
    const ModelConfig& config, const std::vector<std::pair<std::string, int>>& quantized) {
  std::vector<std::string> modules;
  std::set<std::string> prefixes;
  int bits = 0;
  for (const auto& [name, module_bits] : quantized) {
    if (module_bits > 4) continue;
    std::string prefix = MtpLayerPrefix(config, name);
    if (prefix.empty()) continue;
    modules.push_back(name);
    prefixes.insert(prefix);
    bits = std::max(bits, module_bits);
  }
  if (modules.empty()) return std::nullopt;
  std::vector<std::string> ignores;
  for (const std::string& p : prefixes) ignores.push_back("--ignore 're:" + EscapeRegex(p) + ".*'");
  constexpr size_t kNamed = 3;
  return MtpLowBitsNote{
      fmt::format(
          "{} Linear module(s) of the MTP layer(s) {} are stored at {} bits ({}{}): vLLM "
          "loads them, but int4 MTP heads have been reported to collapse acceptance where "
          "int8 keeps it",
          modules.size(), fmt::join(prefixes, ", "), bits,
          fmt::join(modules.begin(), modules.begin() + std::min(kNamed, modules.size()), ", "),
          modules.size() > kNamed ? ", ..." : ""),
      fmt::format("{}", fmt::join(ignores, " "))};
}

}  // namespace spk
