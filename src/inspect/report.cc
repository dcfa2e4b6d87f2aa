#include "inspect/report.h"

#include <fmt/format.h>

#include <map>

#include "base/json_at.h"
#include "model/quant_config.h"
#include "model/quantized_modules.h"
#include "source/module_reader.h"
#include "source/source.h"
#include "source/source_decode.h"
#include "vllm/map_rules.h"
#include "vllm/serve_line.h"

namespace spk {
namespace {

using Json = nlohmann::ordered_json;

double Gib(uint64_t bytes) { return static_cast<double>(bytes) / (1ull << 30); }

// The target a draft names in its config (EAGLE-3 speculators: verifier.name_or_path).
std::string TargetOf(const ModelConfig& config) {
  const Json& j = config.json;
  if (j.contains("speculators_config") && j["speculators_config"].is_object()) {
    const Json& sc = j["speculators_config"];
    if (sc.contains("verifier") && sc["verifier"].is_object() &&
        sc["verifier"].contains("name_or_path") && sc["verifier"]["name_or_path"].is_string()) {
      return sc["verifier"]["name_or_path"].get<std::string>();
    }
  }
  return "<target>";
}

Json SizeJson(uint64_t before, uint64_t after) {
  return Json{{"bytes_before", before},
              {"bytes_after", after},
              {"gib_before", Gib(before)},
              {"gib_after", Gib(after)},
              {"ratio", before ? static_cast<double>(after) / static_cast<double>(before) : 0.0}};
}

// The quantized modules of a compressed-tensors checkpoint (model/quantized_modules.h, in the
// format of its scheme), each with its weight's shape, the bytes it stores and the bytes of the
// dense weight `dequantize` writes for it.
struct QuantizedModules {
  struct Owner {
    std::string module;
    bool values;  // the tensor holding the values, not a scale, shape or zero point
  };
  std::map<std::string, Owner> owner_of;  // stored tensor -> its module
  Json modules = Json::array();
  uint64_t stored_bytes = 0, dense_bytes = 0;
  std::vector<std::string> warnings;
};

QuantizedModules ReadQuantizedModules(const SourceCheckpoint& src) {
  QuantizedModules out;
  auto scheme = SchemeFromConfig(src.dir + "/config.json", src.config);
  if (!scheme.ok()) {
    out.warnings.push_back(scheme.status().message() + "; its modules are not listed");
    return out;
  }
  const WeightCodec& codec = *scheme->scheme->codec;
  auto has = [&](const std::string& name) { return src.files.Find(name).has_value(); };
  for (const TensorMeta& t : src.tensors) {
    auto module = QuantizedModuleOf(codec, t.name, t.dtype, has);
    if (!module) continue;
    uint64_t stored = 0;
    for (std::string_view suffix : codec.suffixes()) {
      auto located = src.files.Find(*module + std::string(suffix));
      if (!located) continue;
      out.owner_of[*module + std::string(suffix)] = {*module, suffix == ValueSuffix(codec)};
      stored += located->entry->nbytes();
    }
    auto reader = QuantizedModuleReader::Open(src, *module, *scheme);
    if (!reader.ok()) {
      out.warnings.push_back(reader.status().message());
      continue;
    }
    const uint64_t dense =
        static_cast<uint64_t>(reader->rows() * reader->cols()) * DTypeBits(reader->dtype()) / 8;
    out.stored_bytes += stored;
    out.dense_bytes += dense;
    out.modules.push_back({{"module", *module},
                           {"scheme", SchemeLabel(*scheme->scheme, scheme->params.group_size)},
                           {"shape", {reader->rows(), reader->cols()}},
                           {"bytes", stored},
                           {"dense_dtype", DTypeName(reader->dtype())},
                           {"dense_bytes", dense}});
  }
  return out;
}

// Which release's map judged the plan, why that release (`asked`: --vllm-version, "" for the
// default), and what it knows of the architecture (map_rules.h).
Json ModuleMapJson(const MapContext& map, std::string_view asked) {
  if (map.map == nullptr) return nullptr;
  auto name = [](const MappedArchitecture* a) { return a ? Json(a->name) : Json(nullptr); };
  return Json{{"release", map.map->release},
              {"release_source", asked.empty() ? std::string(kDefaultVllmReleaseReason)
                                               : fmt::format("--vllm-version {}", asked)},
              {"architecture", name(map.architecture)},
              {"mtp_architecture", name(map.mtp)},
              {"method", map.architecture ? Json(map.architecture->method()) : Json(nullptr)}};
}

bool ShipsLmHead(const std::vector<TensorMeta>& tensors) {
  for (const TensorMeta& t : tensors) {
    if (t.name.find("lm_head") != std::string::npos) return true;
  }
  return false;
}

// The draft vLLM serves from this checkpoint: the architecture itself when the map lists it as a
// draft, else the MTP draft built from its MTP layers; nullptr for a plain model.
const MappedArchitecture* ServedDraft(const MapContext& map) {
  if (map.architecture != nullptr && map.architecture->is_draft) return map.architecture;
  return map.mtp;
}

// The --speculative-config options the release judged accepts for the draft, with their values:
// {"draft_lm_head_quantization": ["fp8", "nvfp4"]} (an empty object for a plain model, or a
// release without any).
Json ServeOptionsJson(const MapContext& map) {
  Json out = Json::object();
  if (const MappedArchitecture* draft = ServedDraft(map)) {
    for (const auto& [name, values] : draft->serve_options) out[name] = values;
  }
  return out;
}

// What limits those options for this checkpoint: vLLM quantizes the copy of the target's lm_head
// that the draft shares, and shares it only with a draft without a lm_head of its own (or one
// equal to the target's) (v1/worker/gpu/spec_decode/eagle/utils.py).
Json ServeOptionsNotes(const MapContext& map, bool ships_lm_head) {
  Json notes = Json::array();
  const MappedArchitecture* draft = ServedDraft(map);
  if (draft == nullptr || !draft->serve_options.count("draft_lm_head_quantization")) return notes;
  const bool separate = draft == map.architecture;
  if (draft->has_own_lm_head || (separate && ships_lm_head)) {
    notes.push_back(fmt::format(
        "draft_lm_head_quantization quantizes the target's lm_head that the draft shares; {} "
        "declares a lm_head of its own, so vLLM shares (and quantizes) the target's only when the "
        "two are equal, and otherwise refuses: \"draft_lm_head_quantization needs a drafter that "
        "shares the target lm_head\"",
        draft->has_own_lm_head ? draft->name : std::string("this draft")));
  }
  return notes;
}

Result<Json> InspectQuantized(SourceCheckpoint src) {
  SPK_ASSIGN_OR_RETURN(QuantizationConfigView qc,
                       ParseQuantizationConfig(src.dir + "/config.json", src.config.json));
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorMeta& t : src.tensors) {
    names.push_back(t.name);
    shapes.push_back(t.shape);
  }
  FamilyDetection family = DetectFamily(src.config, names, Preset::kAuto, &shapes);
  // The newest module map names the method vLLM serves the architecture with, as the plan's and
  // check's serve lines do (an EAGLE-1 LlamaForCausalLM layout is a draft, DSpark is dspark).
  MapContext map;
  if (Result<MapChoice> choice = ChooseModuleMap(""); choice.ok() && choice->map != nullptr) {
    map = ResolveMapContext(choice->map, src.config, family);
    ApplyModuleMap(map, src.config, &family);
  }
  Json groups = Json::array();
  for (const ConfigGroup& g : qc.groups) {
    Json jg = {{"name", g.name}, {"targets", g.targets}, {"format", g.format}};
    if (g.weights) jg["scheme"] = SchemeLabel(*g.weights);
    groups.push_back(jg);
  }
  const QuantizedModules quantized = ReadQuantizedModules(src);
  Json tensors = Json::array();
  uint64_t total = 0;
  for (const TensorMeta& t : src.tensors) {
    total += t.nbytes();
    const auto owner = quantized.owner_of.find(t.name);
    const bool values = owner != quantized.owner_of.end() && owner->second.values;
    tensors.push_back(
        {{"name", t.name},
         {"dtype", DTypeName(t.dtype)},
         {"shape", t.shape},
         {"bytes", t.nbytes()},
         {"action", values ? "quantized" : "as stored"},
         {"reason", owner == quantized.owner_of.end()
                        ? ""
                        : fmt::format("{} of {}", values ? "values" : "quantization data",
                                      owner->second.module)}});
  }
  std::vector<std::string> warnings = src.files.warnings();
  warnings.insert(warnings.end(), quantized.warnings.begin(), quantized.warnings.end());
  const uint64_t dense_total = total - quantized.stored_bytes + quantized.dense_bytes;
  return Json{{"path", src.dir},
              {"quantized", true},
              {"quant_method", qc.quant_method},
              {"format", qc.format},
              {"config_groups", groups},
              {"ignore", qc.ignore},
              {"family", FamilyName(family.family)},
              {"family_reason", family.reason},
              {"vllm_module_map", ModuleMapJson(map, "")},
              {"quantized_modules", quantized.modules.size()},
              {"modules", quantized.modules},
              {"tensors", tensors},
              {"size", SizeJson(dense_total, total)},
              {"serve", ServeLine(family, src.dir, TargetOf(src.config))},
              {"serve_options", ServeOptionsJson(map)},
              {"serve_options_notes", ServeOptionsNotes(map, ShipsLmHead(src.tensors))},
              {"num_speculative_tokens_reason", family.speculative_tokens_reason},
              {"warnings", warnings}};
}

// "  serve option: draft_lm_head_quantization fp8|nvfp4 (vLLM 0.33.0, file:line): its doc".
template <typename Line>
void RenderServeOptions(const Json& r, Line& line) {
  const Json& options = r.contains("serve_options") ? r["serve_options"] : Json();
  if (!options.is_object() || options.empty()) return;
  const ModuleMap* map = nullptr;
  std::string release;
  if (const Json& m = r["vllm_module_map"]; m.is_object()) {
    release = m.value("release", "");
    if (Result<MapChoice> choice = ChooseModuleMap(release); choice.ok()) map = choice->map;
  }
  for (const auto& [name, values] : options.items()) {
    std::string joined;
    for (const Json& v : values) joined += (joined.empty() ? "" : "|") + v.get<std::string>();
    std::string where = "vLLM " + release, doc;
    if (map != nullptr) {
      if (auto it = map->serve_options.find(name); it != map->serve_options.end()) {
        if (!it->second.defined_at.empty()) where += ", " + it->second.defined_at;
        doc = it->second.doc;
      }
    }
    line(fmt::format("  serve option: \"{}\":\"{}\" ({}){}{}", name, joined, where,
                     doc.empty() ? "" : ": ", doc));
  }
  for (const Json& note : r["serve_options_notes"]) line("    " + note.get<std::string>());
}

}  // namespace

Json PlanReport(const QuantizeSummary& s, bool with_tensors) {
  const QuantPlan& plan = s.plan;
  Json tensors = Json::array();
  if (with_tensors) {
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      const TensorPlan& p = plan.tensors[i];
      const TensorMeta& t = s.tensors[i];
      Json jt = {{"name", t.name},
                 {"dtype", DTypeName(t.dtype)},
                 {"shape", t.shape},
                 {"bytes", t.nbytes()},
                 {"action", p.action == TensorAction::kQuantize ? "quantize" : "keep"},
                 {"reason", p.reason}};
      if (p.is_linear) jt["vllm_module"] = p.vllm_module;
      tensors.push_back(jt);
    }
  }
  std::string out_path = s.destination.empty() ? "<quantized checkpoint>" : s.destination;
  return Json{{"path", s.source_dir},
              {"quantized", false},
              {"decoded_source", s.decoded_from.empty() ? Json() : Json::parse(s.decoded_from)},
              {"destination", s.destination},
              {"family", FamilyName(plan.family.family)},
              {"family_reason", plan.family.reason},
              {"vllm_naming", plan.naming.ToString()},
              {"vllm_module_map", ModuleMapJson(plan.map, plan.options.vllm_version)},
              {"scheme", s.scheme},
              {"group_size", plan.options.group_size},
              {"quantized_tensors", plan.quantized_count()},
              {"kept_tensors", plan.tensors.size() - plan.quantized_count()},
              {"ignore", plan.ignore_entries},
              {"shards", s.shards},
              {"reused_shards", s.reused_shards},
              {"part_shards", s.part_shards},
              {"tensors", tensors},
              {"size", SizeJson(s.source_tensor_bytes, s.output_tensor_bytes)},
              {"serve", ServeLine(plan.family, out_path,
                                  plan.options.target ? plan.options.target->spec : "<target>")},
              {"serve_options", ServeOptionsJson(plan.map)},
              {"serve_options_notes", ServeOptionsNotes(plan.map, plan.has_lm_head)},
              {"num_speculative_tokens_reason", plan.family.speculative_tokens_reason},
              {"copied_files", s.copied_files},
              {"warnings", s.warnings},
              {"seconds", s.seconds}};
}

Result<Json> InspectCheckpoint(const RunContext& run, const QuantizeOptions& options) {
  SPK_ASSIGN_OR_RETURN(SourceCheckpoint src, OpenSourceCheckpoint(run.fs, options.source));
  // A compressed-tensors checkpoint is shown as it is stored; another pre-quantized source (FP8
  // blocks) with the plan for quantizing its decoded weights, as a dense source.
  if (SourceQuantMethod(src.config) == "compressed-tensors") {
    return InspectQuantized(std::move(src));
  }
  QuantizeOptions dry = options;
  dry.dry_run = true;
  dry.destination.clear();
  SPK_ASSIGN_OR_RETURN(QuantizeSummary summary, QuantizeCheckpoint(run, dry));
  return PlanReport(summary, /*with_tensors=*/true);
}

std::string RenderReport(const Json& r, bool with_tensors) {
  std::string out;
  auto line = [&](std::string s) { out += s + "\n"; };
  line(fmt::format("checkpoint: {}", r.value("path", "")));
  line(fmt::format("family:     {} ({})", r.value("family", ""), r.value("family_reason", "")));
  if (auto d = r.find("decoded_source"); d != r.end() && d->is_object()) {
    // The source's own quantization_config, as its producer wrote it: any field may be of any type
    // (a ModelOpt producer with a quant_method that is not a string still decodes as modelopt).
    // An older ModelOpt export's hf_quant_config.json names its producer, not a quant_method.
    const nlohmann::json source(*d);
    const JsonAt qc(source, "quantization_config");
    Result<std::string> method = qc.Key("quant_method").String();
    if (!method.ok()) method = qc.Key("producer").Key("name").String();
    line(fmt::format("source:     decoded from quant_method {} on the fly (docs/formats.md)",
                     method.ok() ? *method : std::string("?")));
  }
  if (r.value("quantized", false)) {
    for (const Json& g : r["config_groups"]) {
      line(fmt::format("scheme:     {} {} targets {}", g.value("scheme", "?"),
                       g.value("format", ""), g["targets"].dump()));
    }
    line(fmt::format("quantized modules: {}", r["quantized_modules"].get<size_t>()));
    for (const Json& m : r["modules"]) {
      line(fmt::format("  {:<54} {:<12} {} bytes (dense {}: {} bytes)",
                       m["module"].get<std::string>(), m["shape"].dump(),
                       m["bytes"].get<uint64_t>(), m["dense_dtype"].get<std::string>(),
                       m["dense_bytes"].get<uint64_t>()));
    }
  } else {
    line(fmt::format("naming:     vLLM module names with {}", r.value("vllm_naming", "")));
    line(fmt::format("plan:       {} tensors quantized, {} kept as they are",
                     r["quantized_tensors"].get<size_t>(), r["kept_tensors"].get<size_t>()));
  }
  if (const Json& map = r["vllm_module_map"]; map.is_object()) {
    line(fmt::format("vllm map:   judged for vLLM {} ({}): {}", map["release"].get<std::string>(),
                     map.value("release_source", ""),
                     map["architecture"].is_string()
                         ? "architecture " + map["architecture"].get<std::string>()
                         : std::string("architecture not in the map")));
  }
  line(fmt::format("ignore:     {}", r["ignore"].dump()));
  const Json& size = r["size"];
  line(fmt::format("size:       {} bytes ({:.3f} GiB) -> {} bytes ({:.3f} GiB), x{:.3f}",
                   size["bytes_before"].get<uint64_t>(), size["gib_before"].get<double>(),
                   size["bytes_after"].get<uint64_t>(), size["gib_after"].get<double>(),
                   size["ratio"].get<double>()));
  if (with_tensors && !r["tensors"].empty()) {
    line("");
    line(fmt::format("{:<56} {:<5} {:<16} {:<9} {}", "tensor", "dtype", "shape", "action",
                     "reason"));
    for (const Json& t : r["tensors"]) {
      line(fmt::format("{:<56} {:<5} {:<16} {:<9} {}", t["name"].get<std::string>(),
                       t["dtype"].get<std::string>(), t["shape"].dump(),
                       t["action"].get<std::string>(), t["reason"].get<std::string>()));
    }
  }
  for (const Json& w : r["warnings"]) line(fmt::format("warning:    {}", w.get<std::string>()));
  line("");
  line(fmt::format("serve with: {}", r.value("serve", "")));
  RenderServeOptions(r, line);
  std::string why = r.value("num_speculative_tokens_reason", "");
  if (!why.empty() && why != "not a draft") line(fmt::format("  num_speculative_tokens: {}", why));
  return out;
}

}  // namespace spk
