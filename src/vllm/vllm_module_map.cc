#include "vllm/vllm_module_map.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>

#include "vllm/vllm_module_map_data.h"

namespace spk {
namespace {

// The release of an embedded map file "vllm-<release>.json".
std::string ReleaseOfFileName(std::string_view name) {
  name.remove_prefix(std::min(name.size(), std::string_view("vllm-").size()));
  if (name.ends_with(".json")) name.remove_suffix(std::string_view(".json").size());
  return std::string(name);
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
      return CompareVllmVersions(a.version, b.version) < 0;
    });
    return maps;
  }();
  return kMaps;
}

std::string DefaultVllmRelease() {
  return ModuleMaps().empty() ? std::string() : ModuleMaps().back().release;
}

namespace {

// The map of a release older than every map: it knows no architecture, so every checkpoint is
// judged by the unknown-architecture rules (map_rules.h). One per release asked, for the process.
const ModuleMap* StandInMap(const VllmVersion& version) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<ModuleMap>> maps;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<ModuleMap>& map = maps[version.release()];
  if (map == nullptr) {
    map = std::make_unique<ModuleMap>();
    map->release = version.release();
    map->version = *ParseVllmVersion(map->release);
    map->stand_in = true;
  }
  return map.get();
}

}  // namespace

Result<MapChoice> ChooseModuleMap(std::string_view release) {
  const std::vector<ModuleMap>& maps = ModuleMaps();
  MapChoice choice;
  if (maps.empty()) return choice;
  if (release.empty()) {
    choice.map = &maps.back();
    return choice;
  }
  SPK_ASSIGN_OR_RETURN(VllmVersion version, ParseVllmVersion(release));
  // By release: "0.32.0+cpu" is 0.32.0's map; a pre-release is judged by its release's.
  for (auto it = maps.rbegin(); it != maps.rend(); ++it) {
    int order = CompareVllmReleases(version, it->version);
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
  choice.map = StandInMap(version);
  choice.warning = fmt::format(
      "vLLM {} is older than every module map this sparkulator has (the oldest is {}): judged "
      "as an architecture no map knows (standard decoder Linears only for a draft)",
      release, maps.front().release);
  return choice;
}

namespace {

bool HasArchitecture(const ModuleMap& m, const std::string& name) {
  return m.architectures.count(name) > 0 || m.not_built.count(name) > 0;
}

// The compiled-in map nearest `map`'s release that `has`: the newest older one, else the oldest
// newer one; nullptr when none. `*removed`: it is an older one.
const ModuleMap* NearestHaving(const ModuleMap& map,
                               const std::function<bool(const ModuleMap&)>& has, bool* removed) {
  const ModuleMap* last_before = nullptr;
  const ModuleMap* first_after = nullptr;
  for (const ModuleMap& m : ModuleMaps()) {  // oldest first
    const int order = CompareVllmReleases(m.version, map.version);
    if (order < 0 && has(m)) last_before = &m;
    if (order > 0 && has(m) && first_after == nullptr) first_after = &m;
  }
  *removed = last_before != nullptr;
  return last_before != nullptr ? last_before : first_after;
}

std::string LacksPhrase(const ModuleMap& nearest, bool removed) {
  return (removed ? "removed after " : "first appears in ") + nearest.release;
}

// `a` of `map` loads no checkpoint (MappedArchitecture::load_fails): the first newer release whose
// map builds and loads it serves it (vLLM's fix), else the newest older one.
LackedKind LoadFails(const ModuleMap& map, const MappedArchitecture& a) {
  LackedKind lacked;
  lacked.architecture = a.name;
  lacked.when = "its load_weights fails for every checkpoint";
  const ModuleMap* nearest = nullptr;
  for (const ModuleMap& m : ModuleMaps()) {  // oldest first
    auto it = m.architectures.find(a.name);
    if (it == m.architectures.end() || !it->second.load_fails.empty()) continue;
    const int order = CompareVllmReleases(m.version, map.version);
    if (order > 0) {
      nearest = &m;
      break;
    }
    if (order < 0) nearest = &m;
  }
  const std::string failure = fmt::format(
      "vLLM {} cannot load {} ({}): its load_weights fails for every checkpoint, dense or "
      "quantized, with an error no weight name avoids (\"{}\", on the map's build)",
      map.release, a.name, a.file, a.load_fails);
  if (nearest == nullptr) {
    lacked.message = failure + "; no release this sparkulator has a map of loads it";
    return lacked;
  }
  lacked.serving_release = nearest->release;
  lacked.message = fmt::format("{}: serve it on {}, or check/quantize with --vllm-version {}",
                               failure, nearest->release, nearest->release);
  return lacked;
}

}  // namespace

std::optional<LackedKind> ReleaseLacksKind(const ModuleMap& map, const ModelConfig& config) {
  if (map.stand_in) return std::nullopt;
  LackedKind lacked;
  const ModuleMap* nearest = nullptr;
  bool removed = false;
  const std::string& format = config.speculators_model_type;
  if (!format.empty() && map.speculators.count(format) == 0) {
    // The format vLLM reads the config by: the architecture it builds is the nearest release's.
    nearest = NearestHaving(
        map, [&](const ModuleMap& m) { return m.speculators.count(format) > 0; }, &removed);
    if (nearest == nullptr) return std::nullopt;
    lacked.architecture =
        std::string(SpeculatorsArchitecture(nearest->speculators.at(format), config));
    if (lacked.architecture.empty()) lacked.architecture = "speculators format " + format;
  } else {
    // An architecture the map knows: only where its load_weights fails for every checkpoint.
    for (const MappedArchitecture* a :
         {FindArchitecture(map, config), FindMtpArchitecture(map, config)}) {
      if (a != nullptr && !a->load_fails.empty()) return LoadFails(map, *a);
    }
    // Else only where the map knows neither it nor the model's MTP layers.
    if (FindArchitecture(map, config) != nullptr || FindMtpArchitecture(map, config) != nullptr) {
      return std::nullopt;
    }
    const SpeculatorsFormat* f = FindSpeculatorsFormat(map, config);
    if (f != nullptr) {
      lacked.architecture = std::string(SpeculatorsArchitecture(*f, config));
    } else if (!config.architectures.empty()) {
      lacked.architecture = config.architectures.front();
    }
    if (lacked.architecture.empty() || HasArchitecture(map, lacked.architecture)) {
      return std::nullopt;
    }
    nearest = NearestHaving(
        map, [&](const ModuleMap& m) { return HasArchitecture(m, lacked.architecture); }, &removed);
    if (nearest == nullptr) return std::nullopt;
  }
  lacked.when = LacksPhrase(*nearest, removed);
  lacked.serving_release = nearest->release;
  lacked.message = fmt::format(
      "vLLM {} does not build {} ({}): serve it on {}, or check/quantize "
      "with --vllm-version {}",
      map.release, lacked.architecture, lacked.when, nearest->release, nearest->release);
  return lacked;
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
