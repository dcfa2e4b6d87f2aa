// ParseModuleMap: a module map's JSON, read field by field against its schema
// (kModuleMapSchemaVersion). A field the reader reads that is missing where required, or of
// another type, refuses the whole map with its JSON path; fields the generator writes as null
// (a module it could not trace) are read as absent where the schema allows null.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "vllm/vllm_module_map.h"

namespace spk {
namespace {

using Json = nlohmann::json;

enum class Type { kObject, kArray, kString, kBool, kInt };
enum class Need { kRequired, kOptional };  // optional: absent or null

std::string_view TypeName(Type type) {
  switch (type) {
    case Type::kObject:
      return "an object";
    case Type::kArray:
      return "an array";
    case Type::kString:
      return "a string";
    case Type::kBool:
      return "a boolean";
    case Type::kInt:
      return "an integer";
  }
  return "";
}

std::string_view TypeNameOf(const Json& j) {
  if (j.is_object()) return "an object";
  if (j.is_array()) return "an array";
  if (j.is_string()) return "a string";
  if (j.is_boolean()) return "a boolean";
  if (j.is_number_integer()) return "an integer";
  if (j.is_number()) return "a number";
  return "null";
}

bool HasType(const Json& j, Type type) {
  switch (type) {
    case Type::kObject:
      return j.is_object();
    case Type::kArray:
      return j.is_array();
    case Type::kString:
      return j.is_string();
    case Type::kBool:
      return j.is_boolean();
    case Type::kInt:
      return j.is_number_integer();
  }
  return false;
}

// "architectures.DFlashDraftModel", a key with dots in it quoted: modules["model.fc"].
std::string Child(const std::string& path, std::string_view key) {
  if (key.empty() || key.find('.') != std::string_view::npos) {
    return fmt::format("{}[\"{}\"]", path, key);
  }
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

// Reads fields of a map, keeping the first error (later reads return nothing).
class Reader {
 public:
  explicit Reader(std::string_view origin) : origin_(origin) {}

  // `j` itself (at `path`) when it has `type`; nullptr when it is null and optional, or on error.
  const Json* Value(const Json& j, const std::string& path, Type type, Need need) {
    if (!status_.ok()) return nullptr;
    if (j.is_null() && need == Need::kOptional) return nullptr;
    if (HasType(j, type)) return &j;
    Fail(path, fmt::format("expected {}, got {}", TypeName(type), TypeNameOf(j)));
    return nullptr;
  }

  // The field `key` of object `j` (at `path`).
  const Json* Get(const Json& j, const std::string& path, const char* key, Type type, Need need) {
    if (!status_.ok()) return nullptr;
    auto it = j.find(key);
    if (it == j.end()) {
      if (need == Need::kRequired) Fail(Child(path, key), "missing");
      return nullptr;
    }
    return Value(*it, Child(path, key), type, need);
  }

  std::string Str(const Json& j, const std::string& path, const char* key, Need need) {
    const Json* f = Get(j, path, key, Type::kString, need);
    return f != nullptr ? f->get<std::string>() : std::string();
  }
  bool Bool(const Json& j, const std::string& path, const char* key, Need need) {
    const Json* f = Get(j, path, key, Type::kBool, need);
    return f != nullptr && f->get<bool>();
  }
  std::optional<int64_t> Int(const Json& j, const std::string& path, const char* key, Need need) {
    const Json* f = Get(j, path, key, Type::kInt, need);
    return f != nullptr ? std::optional<int64_t>(f->get<int64_t>()) : std::nullopt;
  }
  // An array of strings.
  std::vector<std::string> Strings(const Json& j, const std::string& path, const char* key,
                                   Need need) {
    std::vector<std::string> out;
    const Json* f = Get(j, path, key, Type::kArray, need);
    if (f == nullptr) return out;
    for (size_t i = 0; i < f->size(); ++i) {
      const std::string at = fmt::format("{}[{}]", Child(path, key), i);
      if (const Json* s = Value((*f)[i], at, Type::kString, Need::kRequired)) {
        out.push_back(s->get<std::string>());
      }
    }
    return out;
  }

  void Fail(const std::string& path, const std::string& what) {
    if (status_.ok())
      status_ = Status::InvalidInput(fmt::format("{}: {}: {}", origin_, path, what));
  }
  const Status& status() const { return status_; }

 private:
  std::string origin_;
  Status status_;
};

MappedModule ParseModule(Reader& r, const Json& m, const std::string& path,
                         const std::vector<std::pair<std::string, std::string>>& unguarded_reads) {
  MappedModule module;
  module.vllm_prefix = r.Str(m, path, "prefix", Need::kRequired);
  module.module_class = r.Str(m, path, "class", Need::kRequired);
  module.parallel = ParallelStyleOfClass(module.module_class);
  module.quantized = r.Bool(m, path, "quantized", Need::kRequired);
  module.read_directly = r.Bool(m, path, "weight_read_directly", Need::kOptional);
  if (module.read_directly) {
    // The generator records each direct read by the module's leaf name.
    std::string leaf = module.vllm_prefix.substr(module.vllm_prefix.rfind('.') + 1);
    for (const auto& [name, at] : unguarded_reads) {
      if (name == leaf) {
        module.read_at = at;
        break;
      }
    }
  }
  return module;
}

// One mapping ({} when the config held none), or a list of those when the Linears were asked of
// configs holding different ones: held only where every one holds a mapping.
MappedArchitecture::PackedMapping PackedMappingOf(Reader& r, const Json& a,
                                                  const std::string& path) {
  using PackedMapping = MappedArchitecture::PackedMapping;
  constexpr const char* kKey = "quant_config_packed_modules_mapping";
  auto it = a.find(kKey);
  if (it == a.end() || it->is_null()) return PackedMapping::kUnknown;
  if (it->is_object()) return it->empty() ? PackedMapping::kNone : PackedMapping::kHeld;
  const Json* list = r.Value(*it, Child(path, kKey), Type::kArray, Need::kRequired);
  if (list == nullptr || list->empty()) return PackedMapping::kUnknown;
  PackedMapping held = PackedMapping::kHeld;
  for (size_t i = 0; i < list->size(); ++i) {
    const Json* one = r.Value((*list)[i], fmt::format("{}[{}]", Child(path, kKey), i),
                              Type::kObject, Need::kRequired);
    if (one == nullptr || one->empty()) held = PackedMapping::kNone;
  }
  return held;
}

// The options vLLM accepted for this draft ("accepted": true), and its lm_head flag.
void ParseServeOptions(Reader& r, const Json& a, const std::string& arch_path,
                       MappedArchitecture* arch) {
  const Json* options = r.Get(a, arch_path, "serve_options", Type::kObject, Need::kOptional);
  if (options == nullptr) return;
  const std::string path = Child(arch_path, "serve_options");
  for (const auto& [name, o] : options->items()) {
    const std::string at = Child(path, name);
    if (r.Value(o, at, Type::kObject, Need::kRequired) == nullptr) return;
    arch->has_own_lm_head =
        r.Bool(o, at, "has_own_lm_head", Need::kOptional) || arch->has_own_lm_head;
    std::vector<std::string> values = r.Strings(o, at, "values", Need::kOptional);
    if (r.Bool(o, at, "accepted", Need::kRequired)) arch->serve_options.emplace(name, values);
  }
}

// The top-level "schemes": every format the verdicts cover, exactly one of them the base.
void ParseSchemes(Reader& r, const Json& j, ModuleMap* map) {
  const Json* schemes = r.Get(j, "", "schemes", Type::kObject, Need::kRequired);
  if (schemes == nullptr) return;
  int bases = 0;
  for (const auto& [format, s] : schemes->items()) {
    const std::string at = Child("schemes", format);
    if (r.Value(s, at, Type::kObject, Need::kRequired) == nullptr) return;
    SchemeBuild build{r.Bool(s, at, "base", Need::kRequired),
                      r.Str(s, at, "platform", Need::kRequired)};
    if (const Json* qc = r.Get(s, at, "quantization_config", Type::kObject, Need::kRequired)) {
      if (r.Str(*qc, Child(at, "quantization_config"), "format", Need::kRequired) != format) {
        r.Fail(Child(Child(at, "quantization_config"), "format"), "not the scheme's key");
      }
    }
    bases += build.base ? 1 : 0;
    map->schemes.emplace(format, std::move(build));
  }
  if (bases != 1) r.Fail("schemes", fmt::format("{} base formats, expected one", bases));
}

// An architecture's "scheme_verdicts": for every format of `map.schemes` but the base, vLLM's
// refusal to build it (into arch->refused_by_format) and, by module key, the verdicts that differ
// from the base's (returned: module key -> format -> quantized). A format the top level does not
// list, a missing one, or a module the architecture's "modules" does not list refuses the map.
std::map<std::string, std::map<std::string, bool, std::less<>>> ParseSchemeVerdicts(
    Reader& r, const ModuleMap& map, const Json& a, const std::string& path,
    MappedArchitecture* arch) {
  std::map<std::string, std::map<std::string, bool, std::less<>>> by_module;
  const Json* verdicts = r.Get(a, path, "scheme_verdicts", Type::kObject, Need::kRequired);
  if (verdicts == nullptr) return by_module;
  const std::string vpath = Child(path, "scheme_verdicts");
  for (const auto& [format, build] : map.schemes) {
    if (!build.base && !verdicts->contains(format)) r.Fail(Child(vpath, format), "missing");
  }
  const Json* modules = a.contains("modules") ? &a["modules"] : nullptr;
  for (const auto& [format, v] : verdicts->items()) {
    const std::string at = Child(vpath, format);
    auto known = map.schemes.find(format);
    if (known == map.schemes.end() || known->second.base) {
      r.Fail(at, "not a non-base format of the map's schemes");
      break;
    }
    if (r.Value(v, at, Type::kObject, Need::kRequired) == nullptr) break;
    std::string error = r.Str(v, at, "error", Need::kOptional);
    if (!error.empty()) arch->refused_by_format.emplace(format, std::move(error));
    const Json* differing = r.Get(v, at, "modules", Type::kObject, Need::kRequired);
    if (differing == nullptr) break;
    for (const auto& [key, m] : differing->items()) {
      const std::string mat = Child(Child(at, "modules"), key);
      if (r.Value(m, mat, Type::kObject, Need::kRequired) == nullptr) break;
      // (A "modules" that is missing or not an object is refused with its own path below.)
      if (modules != nullptr && modules->is_object() && !modules->contains(key)) {
        r.Fail(mat, "not a module of the architecture's modules");
        break;
      }
      r.Str(m, mat, "quant_method", Need::kOptional);
      r.Str(m, mat, "scheme", Need::kOptional);
      by_module[key][format] = r.Bool(m, mat, "quantized", Need::kRequired);
    }
  }
  return by_module;
}

MappedArchitecture ParseArchitecture(Reader& r, const ModuleMap& map, const std::string& name,
                                     const Json& a, const std::string& path) {
  MappedArchitecture arch;
  arch.name = name;
  arch.file = r.Str(a, path, "file", Need::kOptional);
  arch.is_draft = r.Str(a, path, "role", Need::kRequired) == "draft";
  arch.methods = r.Strings(a, path, "methods", Need::kRequired);
  arch.layer_offset = r.Int(a, path, "layer_offset", Need::kOptional);
  if (const Json* built = r.Get(a, path, "built", Type::kObject, Need::kOptional)) {
    arch.target = r.Str(*built, Child(path, "built"), "target", Need::kOptional);
    arch.tiny_target_layers =
        r.Int(*built, Child(path, "built"), "target_layers", Need::kOptional).value_or(0);
  }
  arch.checkpoint_model_types = r.Strings(a, path, "checkpoint_model_types", Need::kOptional);
  arch.built_under_target_config = r.Str(a, path, "quant_config_from", Need::kOptional) == "target";
  if (const Json* refuses = r.Get(a, path, "refuses_unstored", Type::kObject, Need::kOptional)) {
    const std::string at = Child(path, "refuses_unstored");
    arch.refuses_without = r.Strings(*refuses, at, "params", Need::kRequired);
    arch.unstored_refusal = r.Str(*refuses, at, "error", Need::kRequired);
  }
  if (const Json* only =
          r.Get(a, path, "load_weights_takes_only", Type::kObject, Need::kOptional)) {
    const std::string at = Child(path, "load_weights_takes_only");
    arch.load_weights_takes_only =
        MappedArchitecture::TakesOnly{.params = r.Strings(*only, at, "params", Need::kRequired),
                                      .error = r.Str(*only, at, "error", Need::kRequired),
                                      .error_at = r.Str(*only, at, "error_at", Need::kOptional)};
  }
  if (const Json* renamed =
          r.Get(a, path, "weight_packed_renamed", Type::kArray, Need::kOptional)) {
    for (size_t i = 0; i < renamed->size() && arch.weight_packed_renamed_at.empty(); ++i) {
      const std::string at = fmt::format("{}[{}]", Child(path, "weight_packed_renamed"), i);
      const Json* where = r.Value((*renamed)[i], at, Type::kObject, Need::kRequired);
      if (where == nullptr) break;
      arch.weight_packed_renamed_at =
          fmt::format("{}:{}", r.Str(*where, at, "file", Need::kRequired),
                      r.Int(*where, at, "line", Need::kRequired).value_or(0));
      arch.weight_packed_renamed_guard = r.Str(*where, at, "guard", Need::kOptional);
    }
  }
  arch.load_fails = r.Str(a, path, "load_fails", Need::kOptional);
  arch.quant_config_packed_mapping = PackedMappingOf(r, a, path);
  auto by_format = ParseSchemeVerdicts(r, map, a, path, &arch);
  // The direct reads outside an `if` (no "guard"), as (leaf name, "file:line").
  std::vector<std::pair<std::string, std::string>> unguarded_reads;
  if (const Json* reads = r.Get(a, path, "weight_reads", Type::kArray, Need::kRequired)) {
    for (size_t i = 0; i < reads->size(); ++i) {
      const std::string at = fmt::format("{}[{}]", Child(path, "weight_reads"), i);
      const Json* read = r.Value((*reads)[i], at, Type::kObject, Need::kRequired);
      if (read == nullptr) break;
      std::string leaf = r.Str(*read, at, "name", Need::kRequired);
      std::string file = r.Str(*read, at, "file", Need::kRequired);
      std::optional<int64_t> line = r.Int(*read, at, "line", Need::kRequired);
      bool guarded = !r.Str(*read, at, "guard", Need::kOptional).empty();
      if (!guarded)
        unguarded_reads.emplace_back(leaf, fmt::format("{}:{}", file, line.value_or(0)));
    }
  }
  if (const Json* modules = r.Get(a, path, "modules", Type::kObject, Need::kRequired)) {
    const std::string modules_path = Child(path, "modules");
    for (const auto& [prefix, m] : modules->items()) {
      const std::string at = Child(modules_path, prefix);
      if (r.Value(m, at, Type::kObject, Need::kRequired) == nullptr) break;
      MappedModule module = ParseModule(r, m, at, unguarded_reads);
      if (auto it = by_format.find(prefix); it != by_format.end()) {
        module.quantized_by_format = std::move(it->second);
      }
      std::vector<std::string> names = r.Strings(m, at, "checkpoint_names", Need::kOptional);
      // A module the generator could not trace to checkpoint names loads under its own path or
      // its prefix (a MoE layer's experts: path "...mlp.experts.routed_experts", prefix
      // "...mlp.experts").
      const bool traced = !names.empty();
      if (!traced) {
        std::string own = r.Str(m, at, "path", Need::kOptional);
        names = {own.empty() ? prefix : own, prefix};
      }
      for (const std::string& n : names) {
        module.checkpoint_name = traced ? n : "";
        auto [it, added] = arch.modules.emplace(NormalizedModuleName(n), module);
        // A checkpoint tensor vLLM loads into two modules (DeepSeek-V4 DSpark copies each
        // mtp.N.attn.wkv into the cross-layer context_wkv_proj beside its layer's
        // fused_wqa_wkv) is planned with its layer's module, whose other shards it must agree
        // with; the cross-layer copy is not followed (one module per tensor).
        if (!added && !Contains(it->second.vllm_prefix, "layers.") &&
            Contains(module.vllm_prefix, "layers.")) {
          it->second = module;
        }
      }
    }
  }
  for (const std::string& p : r.Strings(a, path, "other_params", Need::kOptional)) {
    arch.plain_params.insert(NormalizedModuleName(p));
  }
  if (const Json* packed =
          r.Get(a, path, "packed_modules_mapping", Type::kObject, Need::kOptional)) {
    for (const auto& [fused, shards] : packed->items()) {
      arch.packed_modules_mapping.emplace(
          fused, r.Strings(*packed, Child(path, "packed_modules_mapping"), fused.c_str(),
                           Need::kRequired));
    }
  }
  ParseServeOptions(r, a, path, &arch);
  return arch;
}

SpeculatorsFormat ParseSpeculatorsFormat(Reader& r, const Json& f, const std::string& path) {
  SpeculatorsFormat format;
  if (const Json* archs = r.Get(f, path, "architectures", Type::kObject, Need::kRequired)) {
    for (const auto& [model_type, arch] : archs->items()) {
      const Json* name = r.Value(arch, Child(Child(path, "architectures"), model_type),
                                 Type::kString, Need::kRequired);
      if (name != nullptr) format.architectures.emplace(model_type, name->get<std::string>());
    }
  }
  if (const Json* spec = r.Get(f, path, "speculative_config", Type::kObject, Need::kOptional)) {
    format.method = r.Str(*spec, Child(path, "speculative_config"), "method", Need::kOptional);
    for (const auto& [key, value] : spec->items()) {
      if (key != "method") format.fields.emplace_back(key, value.dump());
    }
  }
  return format;
}

// The top-level sections beside the architectures: speculators formats, serve options, kernels.
void ParseReleaseSections(Reader& r, const Json& j, ModuleMap* map) {
  if (const Json* formats = r.Get(j, "", "speculators", Type::kObject, Need::kOptional)) {
    for (const auto& [name, f] : formats->items()) {
      const std::string at = Child("speculators", name);
      if (r.Value(f, at, Type::kObject, Need::kRequired) == nullptr) return;
      map->speculators.emplace(name, ParseSpeculatorsFormat(r, f, at));
    }
  }
  if (const Json* options = r.Get(j, "", "serve_options", Type::kObject, Need::kOptional)) {
    for (const auto& [name, o] : options->items()) {
      const std::string at = Child("serve_options", name);
      if (r.Value(o, at, Type::kObject, Need::kRequired) == nullptr) return;
      map->serve_options.emplace(name, ServeOption{r.Strings(o, at, "values", Need::kRequired),
                                                   r.Str(o, at, "defined_at", Need::kOptional),
                                                   r.Str(o, at, "doc", Need::kOptional)});
    }
  }
  const Json* kernels = r.Get(j, "", "kernels", Type::kObject, Need::kOptional);
  const Json* k = kernels == nullptr ? nullptr
                                     : r.Get(*kernels, "kernels", "wna16_batch_invariant",
                                             Type::kObject, Need::kOptional);
  if (k != nullptr) {
    const std::string at = "kernels.wna16_batch_invariant";
    map->batch_invariant.probed = true;
    map->batch_invariant.loads_without_kernel =
        r.Bool(*k, at, "loads_without_kernel", Need::kRequired);
    map->batch_invariant.evidence = r.Str(*k, at, "evidence", Need::kOptional);
    map->batch_invariant.refused = r.Str(*k, at, "refused", Need::kOptional);
  }
}

}  // namespace

Result<ModuleMap> ParseModuleMap(std::string_view json, std::string_view origin) {
  Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidInput(
        fmt::format("{}: not a JSON object (expected a module map, "
                    "tools/vllm_module_map/generate.py --print)",
                    origin));
  }
  auto schema = j.find("schema_version");
  if (schema == j.end() || !schema->is_number_integer() ||
      schema->get<int64_t>() != kModuleMapSchemaVersion) {
    return Status::InvalidInput(fmt::format(
        "{}: schema_version: {}, but this sparkulator reads module maps of schema_version {} "
        "(regenerate the map with this sparkulator's tools/vllm_module_map/generate.py --print)",
        origin, schema == j.end() ? std::string("missing") : "is " + schema->dump(),
        kModuleMapSchemaVersion));
  }
  Reader r(origin);
  ModuleMap map;
  map.release = r.Str(j, "", "vllm_version", Need::kRequired);
  const Json* architectures = r.Get(j, "", "architectures", Type::kObject, Need::kRequired);
  SPK_RETURN_IF_ERROR(r.status());
  Result<VllmVersion> version = ParseVllmVersion(map.release);
  if (!version.ok()) {
    return Status::InvalidInput(
        fmt::format("{}: vllm_version: {}", origin, version.status().message()));
  }
  map.version = *version;
  ParseSchemes(r, j, &map);
  for (const auto& [name, a] : architectures->items()) {
    const std::string path = Child("architectures", name);
    if (r.Value(a, path, Type::kObject, Need::kRequired) == nullptr) break;
    if (const Json* error = r.Get(a, path, "error", Type::kString, Need::kOptional)) {
      map.not_built.emplace(name, error->get<std::string>());
    } else {
      map.architectures.emplace(name, ParseArchitecture(r, map, name, a, path));
    }
    if (const Json* d = r.Get(a, path, "as_draft_model", Type::kObject, Need::kOptional)) {
      const std::string prefix =
          r.Str(*d, Child(path, "as_draft_model"), "module_prefix", Need::kOptional);
      if (map.draft_model_prefix.empty()) map.draft_model_prefix = prefix;
    }
  }
  ParseReleaseSections(r, j, &map);
  SPK_RETURN_IF_ERROR(r.status());
  return map;
}

}  // namespace spk
