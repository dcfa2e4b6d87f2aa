#include "checkpoint/vllm_module_map.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "checkpoint/vllm_module_map_data.h"

namespace spk {
namespace {

using Json = nlohmann::json;

// The map's fields may be null (a module the generator could not trace): every read checks.
const Json& Field(const Json& j, const char* key) {
  static const Json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

std::string StringOr(const Json& j, const char* key, std::string fallback = "") {
  const Json& f = Field(j, key);
  return f.is_string() ? f.get<std::string>() : fallback;
}

bool BoolOr(const Json& j, const char* key) {
  const Json& f = Field(j, key);
  return f.is_boolean() && f.get<bool>();
}

int64_t IntOr(const Json& j, const char* key) {
  const Json& f = Field(j, key);
  return f.is_number_integer() ? f.get<int64_t>() : 0;
}

std::vector<std::string> Strings(const Json& j, const char* key) {
  std::vector<std::string> out;
  const Json& f = Field(j, key);
  if (!f.is_array()) return out;
  for (const Json& s : f) {
    if (s.is_string()) out.push_back(s.get<std::string>());
  }
  return out;
}

MappedModule ParseModule(const Json& m, const Json& weight_reads) {
  MappedModule module;
  module.vllm_prefix = StringOr(m, "prefix");
  module.module_class = StringOr(m, "class");
  module.parallel = ParallelStyleOfClass(module.module_class);
  module.quantized = BoolOr(m, "quantized");
  module.read_directly = BoolOr(m, "weight_read_directly");
  if (module.read_directly) {
    // The generator records each direct read by the module's leaf name.
    std::string leaf = module.vllm_prefix.substr(module.vllm_prefix.rfind('.') + 1);
    for (const Json& read : weight_reads) {
      if (StringOr(read, "name") == leaf && Field(read, "guard").is_null()) {
        module.read_at = fmt::format("{}:{}", StringOr(read, "file"), IntOr(read, "line"));
        break;
      }
    }
  }
  return module;
}

// One mapping ({} when the config held none), or a list of those when the Linears were asked of
// configs holding different ones: held only where every one holds a mapping.
MappedArchitecture::PackedMapping PackedMappingOf(const Json& recorded) {
  using PackedMapping = MappedArchitecture::PackedMapping;
  if (recorded.is_object()) return recorded.empty() ? PackedMapping::kNone : PackedMapping::kHeld;
  if (!recorded.is_array() || recorded.empty()) return PackedMapping::kUnknown;
  for (const Json& one : recorded) {
    if (!one.is_object() || one.empty()) return PackedMapping::kNone;
  }
  return PackedMapping::kHeld;
}

// The options vLLM accepted for this draft ("accepted": true), and its lm_head flag.
void ParseServeOptions(const Json& options, MappedArchitecture* arch) {
  if (!options.is_object()) return;
  for (const auto& [name, o] : options.items()) {
    arch->has_own_lm_head = arch->has_own_lm_head || BoolOr(o, "has_own_lm_head");
    if (BoolOr(o, "accepted")) arch->serve_options.emplace(name, Strings(o, "values"));
  }
}

MappedArchitecture ParseArchitecture(const std::string& name, const Json& a) {
  MappedArchitecture arch;
  arch.name = name;
  arch.file = StringOr(a, "file");
  arch.is_draft = StringOr(a, "role") == "draft";
  arch.methods = Strings(a, "methods");
  arch.layers_follow_target = IntOr(a, "layer_offset") > 0;
  arch.layers_from_zero =
      Field(a, "layer_offset").is_number_integer() && IntOr(a, "layer_offset") == 0;
  arch.target = StringOr(Field(a, "built"), "target");
  arch.checkpoint_model_types = Strings(a, "checkpoint_model_types");
  arch.built_under_target_config = StringOr(a, "quant_config_from") == "target";
  arch.refuses_without = Strings(Field(a, "refuses_unstored"), "params");
  arch.unstored_refusal = StringOr(Field(a, "refuses_unstored"), "error");
  arch.quant_config_packed_mapping =
      PackedMappingOf(Field(a, "quant_config_packed_modules_mapping"));
  const Json& reads = Field(a, "weight_reads");
  const Json& modules = Field(a, "modules");
  if (!modules.is_object()) return arch;
  for (const auto& [prefix, m] : modules.items()) {
    MappedModule module = ParseModule(m, reads.is_array() ? reads : Json::array());
    std::vector<std::string> names = Strings(m, "checkpoint_names");
    // A module the generator could not trace to checkpoint names loads under its own path or its
    // prefix (a MoE layer's experts: path "...mlp.experts.routed_experts", prefix
    // "...mlp.experts").
    if (names.empty()) names = {StringOr(m, "path", prefix), prefix};
    for (const std::string& n : names) arch.modules.emplace(NormalizedModuleName(n), module);
  }
  for (const std::string& p : Strings(a, "other_params")) {
    arch.plain_params.insert(NormalizedModuleName(p));
  }
  if (const Json& packed = Field(a, "packed_modules_mapping"); packed.is_object()) {
    for (const auto& [fused, shards] : packed.items()) {
      arch.packed_modules_mapping.emplace(fused, Strings(packed, fused.c_str()));
    }
  }
  ParseServeOptions(Field(a, "serve_options"), &arch);
  return arch;
}

SpeculatorsFormat ParseSpeculatorsFormat(const Json& f) {
  SpeculatorsFormat format;
  const Json& archs = Field(f, "architectures");
  if (archs.is_object()) {
    for (const auto& [model_type, arch] : archs.items()) {
      if (arch.is_string()) format.architectures.emplace(model_type, arch.get<std::string>());
    }
  }
  const Json& spec = Field(f, "speculative_config");
  format.method = StringOr(spec, "method");
  if (spec.is_object()) {
    for (const auto& [key, value] : spec.items()) {
      if (key != "method") format.fields.emplace_back(key, value.dump());
    }
  }
  return format;
}

// The release of an embedded map file "vllm-<release>.json".
std::string ReleaseOfFileName(std::string_view name) {
  name.remove_prefix(std::min(name.size(), std::string_view("vllm-").size()));
  if (name.ends_with(".json")) name.remove_suffix(std::string_view(".json").size());
  return std::string(name);
}

std::vector<int> ReleaseParts(std::string_view release) {
  std::vector<int> parts;
  while (!release.empty()) {
    size_t dot = release.find('.');
    std::string_view part = release.substr(0, dot);
    int value = 0;
    std::from_chars(part.data(), part.data() + part.size(), value);
    parts.push_back(value);
    if (dot == std::string_view::npos) break;
    release.remove_prefix(dot + 1);
  }
  while (parts.size() < 3) parts.push_back(0);
  return parts;
}

bool IsRelease(std::string_view release) {
  return !release.empty() && std::all_of(release.begin(), release.end(),
                                         [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

}  // namespace

ParallelStyle ParallelStyleOfClass(std::string_view module_class) {
  if (module_class == "RowParallelLinear") return ParallelStyle::kRow;
  if (module_class == "ReplicatedLinear" || module_class == "Linear") {
    return ParallelStyle::kReplicated;
  }
  if (module_class == "ColumnParallelLinear" || module_class == "MergedColumnParallelLinear" ||
      module_class == "QKVParallelLinear") {
    return ParallelStyle::kColumn;
  }
  return ParallelStyle::kUnknown;
}

std::string_view MappedArchitecture::method() const {
  for (const std::string& m : methods) {
    if (m != "target" && m != "draft_model") return m;
  }
  return "";
}

bool MappedArchitecture::takes_target_quant_config() const {
  return is_draft && built_under_target_config && method() != "mtp";
}

Result<ModuleMap> ParseModuleMap(std::string_view json, std::string_view origin) {
  Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidInput(
        fmt::format("{}: not a JSON object (expected a module map, "
                    "tools/vllm_module_map/generate.py --print)",
                    origin));
  }
  const Json& version = Field(j, "vllm_version");
  const Json& architectures = Field(j, "architectures");
  if (!version.is_string() || version.get<std::string>().empty() || !architectures.is_object()) {
    return Status::InvalidInput(fmt::format(
        "{}: not a vLLM module map: it needs \"vllm_version\" (a release such as \"0.33.0\") and "
        "an \"architectures\" object, as tools/vllm_module_map/generate.py --print writes",
        origin));
  }
  ModuleMap map;
  map.release = version.get<std::string>();
  for (const auto& [name, a] : architectures.items()) {
    if (!Field(a, "error").is_null()) {
      map.not_built.emplace(name, StringOr(a, "error"));
    } else {
      map.architectures.emplace(name, ParseArchitecture(name, a));
    }
    const std::string prefix = StringOr(Field(a, "as_draft_model"), "module_prefix");
    if (map.draft_model_prefix.empty()) map.draft_model_prefix = prefix;
  }
  if (const Json& formats = Field(j, "speculators"); formats.is_object()) {
    for (const auto& [name, f] : formats.items()) {
      map.speculators.emplace(name, ParseSpeculatorsFormat(f));
    }
  }
  if (const Json& options = Field(j, "serve_options"); options.is_object()) {
    for (const auto& [name, o] : options.items()) {
      map.serve_options.emplace(
          name, ServeOption{Strings(o, "values"), StringOr(o, "defined_at"), StringOr(o, "doc")});
    }
  }
  if (const Json& k = Field(Field(j, "kernels"), "wna16_batch_invariant"); k.is_object()) {
    map.batch_invariant.probed = true;
    map.batch_invariant.loads_without_kernel = BoolOr(k, "loads_without_kernel");
    map.batch_invariant.evidence = StringOr(k, "evidence");
    map.batch_invariant.refused = StringOr(k, "refused");
  }
  return map;
}

const std::vector<ModuleMap>& ModuleMaps() {
  static const std::vector<ModuleMap> kMaps = [] {
    std::vector<ModuleMap> maps;
    for (const EmbeddedFile& embedded : EmbeddedModuleMaps()) {
      Result<ModuleMap> map = ParseModuleMap(embedded.text, embedded.name);
      if (!map.ok() || map->release != ReleaseOfFileName(embedded.name)) {
        std::fprintf(
            stderr, "internal error: the embedded vLLM module map %.*s: %s\n",
            static_cast<int>(embedded.name.size()), embedded.name.data(),
            map.ok() ? "its vllm_version differs from its name" : map.status().message().c_str());
        std::abort();
      }
      maps.push_back(std::move(*map));
    }
    std::sort(maps.begin(), maps.end(), [](const ModuleMap& a, const ModuleMap& b) {
      return CompareReleases(a.release, b.release) < 0;
    });
    return maps;
  }();
  return kMaps;
}

int CompareReleases(std::string_view a, std::string_view b) {
  std::vector<int> x = ReleaseParts(a), y = ReleaseParts(b);
  return x < y ? -1 : (y < x ? 1 : 0);
}

Result<MapChoice> ChooseModuleMap(std::string_view release) {
  const std::vector<ModuleMap>& maps = ModuleMaps();
  MapChoice choice;
  if (maps.empty()) return choice;
  if (release.empty()) {
    choice.map = &maps.back();
    return choice;
  }
  if (!IsRelease(release)) {
    return Status::Usage(fmt::format("vLLM release '{}' is not a version like 0.33.0", release));
  }
  for (auto it = maps.rbegin(); it != maps.rend(); ++it) {
    int order = CompareReleases(release, it->release);
    if (order < 0) continue;
    choice.map = &*it;
    if (order > 0) {
      choice.warning = fmt::format(
          "not verified for vLLM {}: judged by the map of vLLM {}, the newest this sparkulator "
          "knows at or below it (a newer vLLM may build some modules differently)",
          release, it->release);
    }
    return choice;
  }
  return choice;  // older than every map
}

std::string ReleaseLacksArchitecture(const ModuleMap& map, const std::string& name) {
  auto has = [&](const ModuleMap& m) {
    return m.architectures.count(name) > 0 || m.not_built.count(name) > 0;
  };
  if (name.empty() || has(map)) return "";
  const ModuleMap* last_before = nullptr;
  const ModuleMap* first_after = nullptr;
  bool passed = false;  // ModuleMaps() is oldest first
  for (const ModuleMap& m : ModuleMaps()) {
    if (m.release == map.release) {
      passed = true;
    } else if (has(m) && !passed) {
      last_before = &m;
    } else if (has(m) && first_after == nullptr) {
      first_after = &m;
    }
  }
  if (!passed) return "";
  if (last_before != nullptr) return fmt::format("removed after {}", last_before->release);
  if (first_after != nullptr) return fmt::format("first appears in {}", first_after->release);
  return "";
}

const MappedArchitecture* FindArchitecture(const ModuleMap& map, const ModelConfig& config) {
  if (const SpeculatorsFormat* format = FindSpeculatorsFormat(map, config)) {
    // vLLM's speculators reader decides the architecture of such a config: the format's for its
    // transformer_layer_config, keeping a config architecture only where it is one the format
    // builds (algos.py: a dspark config's Qwen3OmniDSparkModel). speculators' own trainer writes
    // "DSparkDraftModel", which is also DeepSeek-V4's class: never looked up by that name.
    for (const std::string& name : config.architectures) {
      const bool built = std::any_of(format->architectures.begin(), format->architectures.end(),
                                     [&](const auto& entry) { return entry.second == name; });
      auto it = map.architectures.find(name);
      if (built && it != map.architectures.end()) return &it->second;
    }
    auto it = map.architectures.find(std::string(SpeculatorsArchitecture(*format, config)));
    return it != map.architectures.end() ? &it->second : nullptr;
  }
  for (const std::string& name : config.architectures) {
    auto it = map.architectures.find(name);
    if (it != map.architectures.end()) return &it->second;
  }
  // Only when no architecture matched: a target whose own architecture is unmapped must never
  // be taken for the draft that vLLM would build from its model_type.
  if (config.model_type.empty()) return nullptr;
  for (const auto& [name, arch] : map.architectures) {
    const auto& types = arch.checkpoint_model_types;
    if (std::find(types.begin(), types.end(), config.model_type) != types.end()) return &arch;
  }
  return nullptr;
}

const SpeculatorsFormat* FindSpeculatorsFormat(const ModuleMap& map, const ModelConfig& config) {
  if (config.speculators_model_type.empty()) return nullptr;
  auto it = map.speculators.find(config.speculators_model_type);
  return it == map.speculators.end() ? nullptr : &it->second;
}

std::string_view SpeculatorsArchitecture(const SpeculatorsFormat& format,
                                         const ModelConfig& config) {
  // vLLM builds the draft's config from transformer_layer_config
  // (speculators/base.py extract_transformers_pre_trained_config).
  std::string model_type;
  if (auto layer = config.json.find("transformer_layer_config");
      layer != config.json.end() && layer->is_object()) {
    auto mt = layer->find("model_type");
    if (mt != layer->end() && mt->is_string()) model_type = mt->get<std::string>();
  }
  for (const std::string& key : {model_type, std::string("*")}) {
    auto it = format.architectures.find(key);
    if (it != format.architectures.end()) return it->second;
  }
  return {};
}

const MappedArchitecture* FindMtpArchitecture(const ModuleMap& map, const ModelConfig& config) {
  for (const auto& [name, arch] : map.architectures) {
    if (arch.method() != "mtp") continue;
    if (std::find(config.architectures.begin(), config.architectures.end(), arch.target) !=
        config.architectures.end()) {
      return &arch;
    }
  }
  return nullptr;
}

const MappedModule* FindModule(const MappedArchitecture& arch, std::string_view checkpoint_module) {
  // The nearest module at or above the name: an expert's projection ("mlp.experts.3.up_proj")
  // loads into its layer's experts module ("mlp.experts"), which the map lists as one module.
  std::string name = NormalizedModuleName(checkpoint_module);
  while (true) {
    auto it = arch.modules.find(name);
    if (it != arch.modules.end()) return &it->second;
    size_t dot = name.rfind('.');
    if (dot == std::string::npos) return nullptr;
    name.resize(dot);
  }
}

bool IsPlainParam(const MappedArchitecture& arch, std::string_view tensor_name) {
  return arch.plain_params.count(NormalizedModuleName(tensor_name)) > 0;
}

std::string NormalizedModuleName(std::string_view name) {
  if (name.starts_with("model.")) name.remove_prefix(6);
  std::string out;
  if (name.starts_with("midlayer.")) {
    out = "layers.#.";
    name.remove_prefix(9);
  }
  while (!name.empty()) {
    size_t dot = name.find('.');
    std::string_view part = name.substr(0, dot);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                               [](char c) { return c >= '0' && c <= '9'; });
    out += digits ? std::string_view("#") : part;
    if (dot == std::string_view::npos) break;
    out += '.';
    name.remove_prefix(dot + 1);
  }
  return out;
}

}  // namespace spk
