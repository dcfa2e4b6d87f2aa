#include "plan/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "base/strings.h"
#include "model/moe.h"
#include "vllm/gemm.h"
#include "vllm/kernel_rules.h"
#include "vllm/module_pattern.h"

namespace spk {
namespace {

// "qkv_proj" -> "(q|k|v|qkv)_proj": the fused name and its shards, so the entry holds with and
// without vLLM's fused-name expansion.
std::string LeafAlternation(std::string_view leaf) {
  auto it = StandardFusedMapping().find(std::string(leaf));
  if (it == StandardFusedMapping().end()) return EscapeRegex(leaf);
  std::vector<std::string> leaves = it->second;
  leaves.emplace_back(leaf);
  constexpr std::string_view kSuffix = "_proj";
  bool common = std::all_of(leaves.begin(), leaves.end(),
                            [&](const std::string& l) { return l.ends_with(kSuffix); });
  std::vector<std::string> stems;
  for (const std::string& l : leaves) {
    stems.push_back(common ? l.substr(0, l.size() - kSuffix.size()) : EscapeRegex(l));
  }
  return fmt::format("({}){}", fmt::join(stems, "|"), common ? std::string(kSuffix) : "");
}

// Where a `re:` ignore entry may start matching vLLM's module name (re.match anchors the start).
enum class EntryStart {
  kAnyPrefix,     // ".*": `name` is the part after "layers.N.", for every layer
  kExact,         // the whole name: a draft's module, named by vLLM as the plan names it
  kPartBoundary,  // "(.*\\.)?": a plain model's module, which vLLM names under "draft_model." when
                  // it serves the model as a method="draft_model" draft (vllm#49893)
};

// A `re:` entry for `name` (a fused vLLM module name, or its part after "layers.N." for
// kAnyPrefix), matching the module and its shards and nothing longer.
std::string IgnoreEntryFor(std::string_view name, EntryStart start) {
  // A name with a dot has a parent even when it is empty: vLLM builds EAGLE MiniCPM's MLP as
  // ".down_proj" (its prefix is "" there), and re.match must see that dot.
  const bool has_parent = name.find('.') != std::string_view::npos;
  std::string body = has_parent ? EscapeRegex(Parent(name)) + "\\." : "";
  std::string_view head = start == EntryStart::kAnyPrefix      ? ".*"
                          : start == EntryStart::kPartBoundary ? "(.*\\.)?"
                                                               : "";
  return fmt::format("re:{}{}{}$", head, body, LeafAlternation(Leaf(name)));
}

// The part of a layer module's name after "layers.N.", or empty for modules outside the layers.
std::string LayerKind(std::string_view name) {
  auto idx = LayerIndex(name);
  if (!idx) return "";
  std::string marker = fmt::format("layers.{}.", *idx);
  return std::string(name.substr(name.find(marker) + marker.size()));
}

struct ModuleState {
  bool dense = false;
};

Result<std::vector<std::string>> WriteIgnoreList(const QuantPlan& plan) {
  std::map<std::string, ModuleState> modules;  // fused vLLM name -> state
  for (const TensorPlan& t : plan.tensors) {
    if (!t.is_linear) continue;
    modules[t.vllm_module].dense = t.action == TensorAction::kKeep;
  }
  // Per kind of layer module: all dense -> one pattern for every layer; mixed -> per module.
  std::map<std::string, std::pair<int, int>> kinds;  // kind -> {dense, quantized}
  for (const auto& [name, state] : modules) {
    std::string kind = LayerKind(name);
    if (kind.empty()) continue;
    (state.dense ? kinds[kind].first : kinds[kind].second)++;
  }
  std::vector<std::string> entries;
  std::set<std::string> seen;
  auto add = [&](std::string entry) {
    if (seen.insert(entry).second) entries.push_back(std::move(entry));
  };
  for (const auto& [kind, counts] : kinds) {
    if (counts.first > 0 && counts.second == 0) add(IgnoreEntryFor(kind, EntryStart::kAnyPrefix));
  }
  for (const auto& [name, state] : modules) {
    if (!state.dense) continue;
    std::string kind = LayerKind(name);
    if (!kind.empty() && kinds[kind].second == 0) continue;  // covered by the kind's pattern
    if (!kind.empty() && !plan.naming.offset_known) {
      return Status::Usage(fmt::format(
          "module '{}' stays dense in some layers only, and {}: pass --target-layers N (the "
          "target's num_hidden_layers)",
          name, kDraftOffsetUnknownReason));
    }
    add(IgnoreEntryFor(name, plan.family.family == ModelFamily::kLlm && !plan.family.map_draft
                                 ? EntryStart::kPartBoundary
                                 : EntryStart::kExact));
  }
  if (plan.has_lm_head) add("lm_head");
  return entries;
}

// The vLLM layer whose members must agree: the fused module (q/k/v, gate/up), or for an expert
// projection the layer's RoutedExperts, which vLLM loads with one MoE method (model/moe.h).
std::string FusedGroup(const TensorPlan& t) {
  return RoutedExpertsModule(t.vllm_module).value_or(t.vllm_module);
}

Status CheckFusedGroups(std::vector<TensorPlan>* tensors) {
  std::map<std::string, std::string> dense_reason;  // fused group -> a member that is dense
  for (const TensorPlan& t : *tensors) {
    if (t.is_linear && t.action == TensorAction::kKeep && !dense_reason.count(FusedGroup(t))) {
      dense_reason[FusedGroup(t)] = t.tensor;
    }
  }
  for (TensorPlan& t : *tensors) {
    if (!t.is_linear || t.action != TensorAction::kQuantize) continue;
    auto it = dense_reason.find(FusedGroup(t));
    if (it == dense_reason.end()) continue;
    t.action = TensorAction::kKeep;
    t.reason = fmt::format("fused into {} with {}, which stays dense (fused shards must agree)",
                           FusedGroup(t), it->second);
  }
  return Status::Ok();
}

// A release whose load_weights drops every quantized Linear's weight_packed when the routed
// experts stay dense (PackedDroppedBesideDenseExperts: Kimi-K3 MTP) would load a checkpoint
// that quantizes its Linears and keeps a stored expert dense with those Linears unloaded.
Status RefuseQuantizedBesideDenseExperts(const QuantPlan& plan, const PlanOptions& options) {
  if (options.scheme == nullptr) return Status::Ok();
  const auto is_expert = [](const TensorPlan& t) {
    return t.is_linear && RoutedExpertsModule(t.vllm_module).has_value();
  };
  const auto dense_expert = std::find_if(plan.tensors.begin(), plan.tensors.end(), [&](auto& t) {
    return is_expert(t) && t.action == TensorAction::kKeep;
  });
  const bool linear_quantized = std::any_of(plan.tensors.begin(), plan.tensors.end(), [&](auto& t) {
    return !is_expert(t) && t.action == TensorAction::kQuantize;
  });
  if (dense_expert == plan.tensors.end() || !linear_quantized) return Status::Ok();
  auto refusal = PackedDroppedBesideDenseExperts(plan.map, *options.scheme, dense_expert->tensor);
  return refusal ? Status::Usage(*refusal) : Status::Ok();
}

}  // namespace

size_t QuantPlan::quantized_count() const {
  return std::count_if(tensors.begin(), tensors.end(),
                       [](const TensorPlan& t) { return t.action == TensorAction::kQuantize; });
}

namespace {

// The kernel rules (gemm.h JudgeGemm) for every Linear the plan would quantize, judged with the
// rows of its whole fused GEMM, as vLLM builds it: a module that breaks one stays dense. Beside
// the plan's own rule, a module no platform builds (vLLM's CUDA kernel chooser refuses it and
// the CPU build refuses it too or never runs the format: the kernel-rule error `check` reports)
// stays dense: w8a16-asym's uint8 with zero points has no kernel but Machete (Marlin and Triton
// take no uint8 zero points), which needs the fused N a multiple of 128, so an MLA
// fused_qkv_a_proj of 192 rows passed the plan's Marlin tile rule and loaded nowhere.
//
// Weights the plan kept dense by one rule (no vLLM kernel builds them; the release's load_weights
// takes none of the names the scheme stores for them): how many, and the first one's reason.
struct KeptDense {
  size_t count = 0;
  std::string first_reason;
  void Add(const std::string& reason) {
    if (count++ == 0) first_reason = reason;
  }
};

// Returns how many weights it kept dense because no platform builds them, and the first reason.
KeptDense KeepKernelRuleBreaksDense(const PlanOptions& options, const MapContext& map,
                                    const FamilyDetection& family, const ModelConfig& config,
                                    std::vector<TensorPlan>* tensors) {
  KeptDense no_kernel;
  std::map<std::string, int64_t> fused_out;  // fused vLLM module -> rows of its members
  for (const TensorPlan& t : *tensors) {
    if (t.is_linear) fused_out[t.vllm_module] += t.out_features;
  }
  for (size_t i = 0; i < tensors->size(); ++i) {
    TensorPlan& t = (*tensors)[i];
    if (t.action != TensorAction::kQuantize) continue;
    std::string_view module = t.tensor;
    module.remove_suffix(std::string_view(".weight").size());
    const GemmJudgement j =
        JudgeGemm(*options.scheme, options.group_size,
                  {.module = module,
                   .vllm_module = t.vllm_module,
                   .out = t.out_features,
                   .in = t.in_features,
                   .fused_out = fused_out[t.vllm_module],
                   .parallel = MapParallelStyle(map, module),
                   .first_built_in = FirstBuiltInWidth(family.family, config.hidden_size,
                                                       t.vllm_module, t.in_features),
                   .rows_permuted = RowsPermutedForRotary(config.architectures, module)},
                  options.tp);
    std::optional<std::string> rule = j.plan_rule;
    if (!rule && j.cuda && (j.cpu || !j.row->cpu_runs_format)) {
      rule = fmt::format("no vLLM kernel builds the fused {} [{}, {}]: on CUDA vLLM raises \"{}\"",
                         t.vllm_module, fused_out[t.vllm_module], t.in_features, *j.cuda);
      no_kernel.Add(*rule);
    }
    if (!rule) continue;
    t.action = TensorAction::kKeep;
    t.reason = *rule;
  }
  return no_kernel;
}

// Weights kept dense by one rule under the scheme and group size asked for: a warning naming the
// first (`why`: why they stay dense); when that leaves nothing quantized, a refusal (`none`: why no
// Linear of the model is, `fix`: what to do), since the output would be a dense copy the user did
// not ask for (w8a16-asym at group 32: Machete, its only kernel, takes groups -1, 64 and 128;
// LongCat MTP, whose load_weights takes only dense names).
Status ReportKeptDense(const KeptDense& kept, std::string_view why, std::string_view none,
                       std::string_view fix, const PlanOptions& options, QuantPlan* plan) {
  if (kept.count == 0) return Status::Ok();
  const bool none_quantized =
      std::none_of(plan->tensors.begin(), plan->tensors.end(),
                   [](const TensorPlan& t) { return t.action == TensorAction::kQuantize; });
  const std::string what =
      fmt::format("--scheme {} --group-size {}", options.scheme->name, options.group_size);
  if (none_quantized) {
    return Status::Usage(fmt::format("{}: {}, so nothing would be quantized ({}); {}", what, none,
                                     kept.first_reason, fix));
  }
  plan->warnings.push_back(fmt::format("{}: {} weight(s) kept dense {}; the first: {}", what,
                                       kept.count, why, kept.first_reason));
  return Status::Ok();
}

// A separate draft that vLLM builds with no quantized Linear under the scheme's format: its map
// entry quantizes none (DFlash2Beam builds every Linear with quant_config=None). Its Linears kept
// dense by the map are reported as one rule (ReportKeptDense): a quantized copy would be the source
// under a quantization_config that vLLM never applies.
bool DraftBuildsNoLinearQuantized(const MapContext& map, const QuantScheme* scheme) {
  const MappedArchitecture* a = map.architecture;
  if (scheme == nullptr || a == nullptr || !a->is_draft || map.mtp != nullptr) return false;
  return std::none_of(a->modules.begin(), a->modules.end(),
                      [&](const auto& m) { return m.second.QuantizedUnder(scheme->format); });
}

// An int scheme of 4 bits or fewer on a model's MTP layers loads, but may cost acceptance.
void WarnOfLowBitMtpLayers(const ModelConfig& config, QuantPlan* plan) {
  const QuantScheme& scheme = *plan->options.scheme;
  if (plan->family.family != ModelFamily::kMtp || scheme.type != WeightType::kInt) return;
  std::vector<std::pair<std::string, int>> quantized;
  std::set<std::string> seen;
  for (const TensorPlan& t : plan->tensors) {
    if (t.action == TensorAction::kQuantize && seen.insert(t.vllm_module).second) {
      quantized.emplace_back(t.vllm_module, scheme.bits);
    }
  }
  if (std::optional<MtpLowBitsNote> note = MtpLayersAtLowBits(config, quantized)) {
    plan->warnings.push_back(note->message +
                             "; measure acceptance (sparkulator bench), or keep "
                             "them dense: " +
                             note->ignore_flags);
  }
}

// Says which fused 3-D tensor a split expert weight came from, once its reason is final.
void NameSplitSources(const std::vector<TensorMeta>& metas, std::vector<TensorPlan>* tensors) {
  for (size_t i = 0; i < tensors->size(); ++i) {
    if (metas[i].split_from.empty()) continue;
    (*tensors)[i].reason +=
        fmt::format(" (split from the fused {}, as model_free_ptq splits it)", metas[i].split_from);
  }
}

}  // namespace

Result<QuantPlan> BuildPlan(const std::vector<TensorMeta>& tensors, const ModelConfig& config,
                            const PlanOptions& options) {
  if (options.tp < 1) return Status::Usage("--tp must be at least 1");
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorMeta& t : tensors) {
    names.push_back(t.name);
    shapes.push_back(t.shape);
  }
  QuantPlan plan;
  plan.options = options;
  // A scheme whose layout no vLLM release loads: refused, or written with a warning.
  if (const KernelRule* row = options.scheme ? KernelRuleFor(*options.scheme) : nullptr;
      row != nullptr && !row->layout_loads_nowhere.empty()) {
    if (!options.allow_unloadable) {
      return Status::Usage(fmt::format(
          "--scheme {}: {}; choose a scheme vLLM loads (w4a16 stores the same int4 weights, "
          "w8a8 or fp8-dynamic quantize the activations too), or pass --allow-unloadable to "
          "write it all the same (another engine, or bytes to compare with model_free_ptq)",
          options.scheme->name, row->layout_loads_nowhere));
    }
    plan.warnings.push_back(fmt::format("--scheme {} written with --allow-unloadable: {}",
                                        options.scheme->name, row->layout_loads_nowhere));
  }
  plan.family = DetectFamily(config, names, options.preset, &shapes);
  SPK_ASSIGN_OR_RETURN(MapChoice choice, ChooseModuleMap(options.vllm_version));
  plan.map = ResolveMapContext(choice.map, config, plan.family);
  if (!choice.warning.empty()) plan.warnings.push_back(choice.warning);
  if (options.scheme != nullptr) {  // the map's verdict for the scheme written is not verified
    std::string unverified = SchemeNotBuiltWarning(plan.map, options.scheme->format);
    if (!unverified.empty()) plan.warnings.push_back(std::move(unverified));
  }
  if (choice.map != nullptr) {  // that release refuses it: no plan is right for it
    if (auto lacked = ReleaseLacksKind(*choice.map, config)) return Status::Usage(lacked->message);
  }
  ApplyModuleMap(plan.map, config, &plan.family);
  // The output is compressed-tensors and never stores KV-cache parameters: vLLM would refuse it
  // whatever the plan quantizes, and check fails it (vllm-refuses-unstored-params), so it is
  // refused here rather than written.
  if (auto refusal = RefusalForUnstoredParams(plan.map, [](const std::string&) { return false; })) {
    return Status::Usage(refusal->message + "; " + refusal->fix);
  }
  // vLLM builds the routed experts under the scheme written, stored or not: a scheme no MoE
  // backend takes is refused for an architecture that has them (check reports it as kernel-rule).
  if (options.scheme != nullptr) {
    if (auto refusal = MoeRefusalFor(plan.map, *options.scheme)) {
      return Status::Usage(fmt::format("--scheme {}; choose {}", refusal->message, refusal->fix));
    }
  }
  plan.naming = NamingFor(plan.family, config, names, options.target_layers);
  AttachModuleMap(plan.map, config, &plan.naming);
  std::vector<std::string> unverified;  // non-standard Linears of an unknown architecture
  KeptDense load_weights_kept;          // Linears whose release's load_weights takes no such names
  KeptDense map_kept;                   // Linears of a draft vLLM builds with none quantized
  const bool builds_none = DraftBuildsNoLinearQuantized(plan.map, options.scheme);
  SPK_ASSIGN_OR_RETURN(auto user_ignore, ParsePatterns(options.ignore, "--ignore"));
  std::vector<bool> ignore_used(user_ignore.size(), false);

  const BuildInputs inputs{.config = &config,
                           .family = &plan.family,
                           .map = &plan.map,
                           .naming = &plan.naming,
                           .scheme = options.scheme,
                           .group_size = options.group_size,
                           .target = options.target ? &*options.target : nullptr};
  for (const TensorMeta& t : tensors) {
    TensorPlan p;
    p.tensor = t.name;
    if (Contains(t.name, "lm_head")) plan.has_lm_head = true;
    const BuildDecision built = DecideVllmBuild(inputs, t);
    if (built.built == Built::kRefused) return Status::Usage(built.reason);
    if (!built.is_linear()) {
      p.reason = built.reason;
      plan.tensors.push_back(std::move(p));
      continue;
    }
    std::string_view module = t.name;
    module.remove_suffix(std::string_view(".weight").size());
    p.is_linear = true;
    p.out_features = t.shape[0];
    p.in_features = t.shape[1];
    std::string vllm_name = ToVllmModuleName(plan.naming, module);
    p.vllm_module = ToFusedVllmModuleName(plan.naming, module);
    for (size_t i = 0; i < user_ignore.size(); ++i) {
      if (user_ignore[i].Matches(vllm_name) || user_ignore[i].Matches(p.vllm_module) ||
          user_ignore[i].Matches(module)) {
        ignore_used[i] = true;
        if (p.reason.empty()) p.reason = fmt::format("--ignore '{}'", user_ignore[i].text());
      }
    }
    // The kernel rules come after the loop: they need the whole fused GEMM.
    const bool quantized = p.reason.empty() && built.built == Built::kQuantizedLinear;
    if (p.reason.empty()) p.reason = built.reason;
    if (quantized) p.action = TensorAction::kQuantize;
    if (built.by == DenseBy::kLoadWeights && p.reason == built.reason) {
      load_weights_kept.Add(built.reason);
    }
    if (builds_none && built.by == DenseBy::kMap && p.reason == built.reason && p.is_linear) {
      map_kept.Add(built.reason);
    }
    // A Linear of an architecture no map knows, kept dense (a draft's) or quantized unverified.
    if (p.reason == built.reason && (built.by == DenseBy::kMap || quantized) &&
        IsUnverifiedByMap(plan.map, module)) {
      unverified.emplace_back(module);
    }
    plan.tensors.push_back(std::move(p));
  }
  for (size_t i = 0; i < user_ignore.size(); ++i) {
    if (!ignore_used[i]) {
      return Status::Usage(fmt::format(
          "--ignore '{}' matches no Linear module (entries are matched against vLLM's module "
          "names, "
          "e.g. '{}', with Python re.match for 're:' entries)",
          user_ignore[i].text(), plan.tensors.empty() ? "" : plan.tensors.front().vllm_module));
    }
  }
  if (std::string warning = UnmappedArchitectureWarning(plan.map, unverified); !warning.empty()) {
    plan.warnings.push_back(std::move(warning));
  }
  SPK_RETURN_IF_ERROR(ReportKeptDense(
      load_weights_kept, "because vLLM's load_weights takes none of the names the scheme stores",
      fmt::format("vLLM {}'s load_weights takes none of this model's Linears as the scheme "
                  "stores them",
                  plan.map.map == nullptr ? "" : plan.map.map->release),
      "serve the source checkpoint unquantized (no compressed-tensors scheme stores only the "
      "names it takes), or judge for a release that loads it with --vllm-version",
      options, &plan));
  if (builds_none) {  // DraftBuildsNoLinearQuantized: the architecture is the map's draft
    SPK_RETURN_IF_ERROR(ReportKeptDense(
        map_kept, "because vLLM builds them unquantized",
        fmt::format("vLLM {} builds no Linear of {} ({}) quantized", plan.map.map->release,
                    plan.map.architecture->name, plan.map.architecture->file),
        "serve the source checkpoint as it is", options, &plan));
  }
  const KeptDense no_kernel =
      KeepKernelRuleBreaksDense(options, plan.map, plan.family, config, &plan.tensors);
  SPK_RETURN_IF_ERROR(ReportKeptDense(no_kernel, "because no vLLM kernel builds them",
                                      "no vLLM kernel builds any Linear of this model",
                                      "choose a group size or scheme that kernel takes", options,
                                      &plan));
  WarnOfLowBitMtpLayers(config, &plan);
  NameSplitSources(tensors, &plan.tensors);
  SPK_RETURN_IF_ERROR(CheckFusedGroups(&plan.tensors));
  SPK_RETURN_IF_ERROR(RefuseQuantizedBesideDenseExperts(plan, options));
  SPK_ASSIGN_OR_RETURN(plan.ignore_entries, WriteIgnoreList(plan));
  SPK_RETURN_IF_ERROR(VerifyIgnoreList(plan, plan.ignore_entries));
  return plan;
}

Status VerifyIgnoreList(const QuantPlan& plan, const std::vector<std::string>& ignore) {
  SPK_ASSIGN_OR_RETURN(auto patterns, ParsePatterns(ignore, "ignore"));
  std::map<std::string, bool> dense;  // fused vLLM module -> dense
  for (const TensorPlan& t : plan.tensors) {
    if (t.is_linear) dense[t.vllm_module] = t.action == TensorAction::kKeep;
  }
  static const FusedMapping kNoMapping;
  for (const auto& [module, is_dense] : dense) {
    IgnoreDecision with = DecideIgnore(module, patterns, StandardFusedMapping());
    IgnoreDecision without = DecideIgnore(module, patterns, kNoMapping);
    if (with.shards_disagree) {
      return Status::InvalidInput(fmt::format(
          "ignore list: the shards of '{}' disagree (some ignored, some not); vLLM fails or loads "
          "the fused layer dense",
          module));
    }
    if (is_dense && !(with.ignored && without.ignored)) {
      return Status::InvalidInput(fmt::format(
          "ignore list: '{}' stays dense but vLLM would treat it as quantized ({} fused-name "
          "expansion) and fail to find weight_packed",
          module, with.ignored ? "without" : "with"));
    }
    if (!is_dense && (with.ignored || without.ignored)) {
      return Status::InvalidInput(fmt::format(
          "ignore list: '{}' is quantized but vLLM would treat it as dense ({} fused-name "
          "expansion) and fail to find its weight",
          module, with.ignored ? "with" : "without"));
    }
  }
  return Status::Ok();
}

}  // namespace spk
