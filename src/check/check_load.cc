// LoadCheckView: the view of one checkpoint, built once in the order check_view.h gives: the vLLM
// judged, the files (check_files.cc), config.json, the family, the module map, --target's config,
// the naming, quantization_config, then the modules (check_view_modules.cc).
#include <fmt/format.h>

#include "check/check_rules.h"
#include "check/vllm_map_build.h"
#include "source/source.h"
#include "vllm/serve_line.h"

namespace spk::check_internal {
namespace {

// The vLLM the version-dependent rules are judged for (CheckOptions).
Status ResolveVllm(CheckView* v) {
  const CheckOptions& options = v->options;
  VllmTarget& vllm = v->vllm;
  std::optional<VllmVersion> version;
  if (!options.vllm_dir.empty()) {
    SPK_ASSIGN_OR_RETURN(VllmVersionSource read, ReadVllmVersion(v->fs, options.vllm_dir));
    vllm.tree = options.vllm_dir;
    vllm.fs = v->fs;
    version = read.version;
    vllm.version_source = read.source;
  }
  if (!version && !options.vllm_version.empty()) {
    SPK_ASSIGN_OR_RETURN(VllmVersion parsed, ParseVllmVersion(options.vllm_version));
    version = parsed;
    vllm.version_source = "--vllm-version";
  }
  if (!version) {
    const std::string release = DefaultVllmRelease();
    version = *ParseVllmVersion(release);
    vllm.version_source =
        vllm.tree.empty() ? std::string(kDefaultVllmReleaseReason)
                          : fmt::format("{}; judged by its code, versions as {} ({})",
                                        vllm.version_source, release, kDefaultVllmReleaseReason);
  }
  vllm.version = *version;
  return Status::Ok();
}

// A config.json that cannot be read is an error of the run (as in LoadFiles); one that does not
// parse is a finding. False: no config to check against.
Result<bool> LoadConfig(CheckView* v, FindingSink& sink) {
  sink.Enter(RuleNamed("config"));
  std::string path = v->dir + "/config.json";
  if (!v->fs->FileExists(path)) {
    sink.Add(FindingCode::kConfigMissing, "", "config.json",
             "no config.json: vLLM cannot build the model",
             "copy config.json from the source model");
    return false;
  }
  SPK_ASSIGN_OR_RETURN(std::string text, v->fs->ReadFile(path));
  auto parsed = ParseModelConfig(path, text);
  if (!parsed.ok()) {
    sink.Add(FindingCode::kConfigInvalid, "", "config.json", parsed.status().message(),
             "fix config.json");
    return false;
  }
  v->config = std::move(parsed).value();
  return true;
}

// The map of the --vllm tree, built by that tree; when it cannot be built the compiled-in maps
// judge, and the finding says why. A map that cannot be written to --vllm-map-out ends the run.
Status BuildTreeMap(CheckView* v, FindingSink& sink) {
  const CheckOptions& options = v->options;
  TreeMapRequest request;
  request.vllm_dir = options.vllm_dir;
  request.python = options.vllm_python;
  request.architectures = ArchitecturesToMap(v->config);
  if (request.architectures.empty()) return Status::Ok();  // config.json names none
  if (options.notice) {
    options.notice(
        fmt::format("building vLLM's module map from {} for {} (its own Python "
                    "builds the model; about 15 s)",
                    options.vllm_dir, fmt::join(request.architectures, ", ")));
  }
  Result<TreeMap> built = BuildModuleMapFromTree(v->fs, request);
  if (!built.ok()) {
    sink.Add(FindingCode::kVllmMapNotBuilt, "", "", built.status().message(),
             "pass --vllm-python PY (a Python that imports this vLLM and torch), or "
             "--vllm-module-map FILE (generate.py --print run in that vLLM's environment)");
    return Status::Ok();
  }
  v->module_map_source = fmt::format("built from {} by {}", options.vllm_dir, built->built_by);
  v->own_map = std::move(built->map);
  if (!options.vllm_map_out.empty()) {
    SPK_RETURN_IF_ERROR(v->fs->WriteFile(options.vllm_map_out, built->json));
  }
  return Status::Ok();
}

// The map of the release judged, into the family.
Status ResolveModuleMap(CheckView* v, FindingSink& sink) {
  sink.Enter(RuleNamed("module-map"));
  const CheckOptions& options = v->options;
  v->module_map_source = "compiled in";
  if (!options.vllm_module_map.empty()) {
    SPK_ASSIGN_OR_RETURN(std::string text, v->fs->ReadFile(options.vllm_module_map));
    SPK_ASSIGN_OR_RETURN(ModuleMap map, ParseModuleMap(text, options.vllm_module_map));
    v->own_map = std::move(map);
    v->module_map_source = options.vllm_module_map;
  } else if (!options.vllm_dir.empty() && options.build_map_from_tree) {
    SPK_RETURN_IF_ERROR(BuildTreeMap(v, sink));
  }
  const ModuleMap* map = v->own_map ? &*v->own_map : nullptr;
  if (map == nullptr) {
    SPK_ASSIGN_OR_RETURN(MapChoice choice, ChooseModuleMap(v->vllm.version.text));
    if (choice.map == nullptr) return Status::Ok();  // no map compiled in
    v->map_warning = choice.warning;
    map = choice.map;
  }
  v->map = ResolveMapContext(map, v->config, v->family);
  ApplyModuleMap(v->map, v->config, &v->family);
  return Status::Ok();
}

// --target's config.json (a target that cannot be found or read ends the run), and what the
// pairing decides: the serve line and the layer count the draft's names follow.
Status LoadTarget(CheckView* v) {
  const CheckOptions& options = v->options;
  SPK_ASSIGN_OR_RETURN(TargetModel target, LoadTargetModel(v->fs, options.target));
  v->serve = v->ServedAsDraftModel() ? DraftModelServeLine(v->dir, options.target)
                                     : ServeLine(v->family, v->dir, options.target);
  if (!v->config.num_target_layers && !options.target_layers) {
    v->naming_target_layers = target.config.num_hidden_layers;
  }
  v->target = std::move(target);
  return Status::Ok();
}

}  // namespace

bool CheckView::ServedAsDraftModel() const {
  // A plain causal LM (no draft marker, no speculative method in the map) is a draft only as
  // vLLM's method="draft_model" (v1/spec_decode/draft_model.py), which is how `--target` pairs it.
  return !options.target.empty() && family.family == ModelFamily::kLlm && !family.map_draft &&
         family.vllm_method.empty();
}

void LoadQuantConfig(CheckView* v) {
  QuantState& q = v->quant;
  q.label = "dense";
  if (!v->config.has_quantization_config) return;
  auto parsed = ParseQuantizationConfig("config.json", v->config.json);
  if (!parsed.ok()) {
    q.parse_error = parsed.status().message();
    return;
  }
  if (parsed->quant_method != "compressed-tensors") {
    q.other_method = parsed->quant_method;
    return;
  }
  q.qc = std::move(parsed).value();
  if (auto scheme = SchemeFromConfig("config.json", v->config); scheme.ok()) q.scheme = *scheme;
  std::vector<std::string> labels;
  for (const ConfigGroup& g : q.qc->groups) {
    QuantState::GroupTargets targets;
    for (const std::string& t : g.targets) {
      if (t == "Linear") {
        targets.patterns.emplace_back(std::nullopt);
        continue;
      }
      auto p = ModulePattern::Parse(t);
      if (!p.ok()) {
        targets.invalid.emplace_back(t, p.status().message());
      } else {
        targets.patterns.emplace_back(std::move(p).value());
      }
    }
    q.targets.push_back(std::move(targets));
    if (g.weights) labels.push_back(SchemeLabel(*g.weights));
  }
  auto ignore = ParsePatterns(q.qc->ignore, "ignore");
  if (!ignore.ok()) {
    q.ignore_error = ignore.status().message();
  } else {
    q.ignore = std::move(ignore).value();
  }
  q.label = labels.empty() ? "compressed-tensors" : fmt::format("{}", fmt::join(labels, ", "));
}

Result<std::unique_ptr<CheckView>> LoadCheckView(FileSystem* fs, const CheckOptions& options,
                                                 const std::string& dir, FindingSink& sink) {
  auto view = std::make_unique<CheckView>();
  CheckView* v = view.get();
  v->fs = fs;
  v->options = options;
  v->dir = dir;
  SPK_RETURN_IF_ERROR(ResolveVllm(v));
  SPK_RETURN_IF_ERROR(LoadFiles(v, sink));
  SPK_ASSIGN_OR_RETURN(v->config_loaded, LoadConfig(v, sink));
  if (!v->config_loaded) return view;
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& [name, located] : v->tensors) {
    names.push_back(name);
    shapes.push_back(located.entry->shape);
  }
  v->family = DetectFamily(v->config, names, Preset::kAuto, &shapes);
  SPK_RETURN_IF_ERROR(ResolveModuleMap(v, sink));
  v->naming_target_layers = options.target_layers;
  if (!options.target.empty()) SPK_RETURN_IF_ERROR(LoadTarget(v));
  v->naming = NamingFor(v->family, v->config, names, v->naming_target_layers);
  AttachModuleMap(v->map, v->config, &v->naming);
  if (v->ServedAsDraftModel() && v->map.map != nullptr) {
    v->naming.proposer_prefix = v->map.map->draft_model_prefix;
  }
  if (v->serve.empty()) v->serve = ServeLine(v->family, dir, "<target>");
  LoadQuantConfig(v);
  CollectModules(v);
  DeriveLinears(v);
  return view;
}

}  // namespace spk::check_internal
