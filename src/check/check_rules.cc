// The rules table of `sparkulator check`, the sink that keeps the findings, and the run: load the
// view, run the rules over it, fill the report.
#include "check/check_rules.h"

#include <cassert>
#include <cstdio>
#include <cstdlib>

#include "source/source.h"

namespace spk::check_internal {

const std::vector<CheckRule>& CheckRules() {
  using K = RuleKind;
  static const std::vector<CheckRule> kRules = {
      {"files", K::kLoad,
       "the shards vLLM loads: the index, the files it names, and each file's safetensors rules"},
      {"index", K::kLoad, "the index against the shards' headers, and shards it does not name"},
      {"config", K::kLoad, "config.json is there and parses"},
      {"module-map", K::kLoad, "vLLM's module map of the release judged, or of the --vllm tree"},
      {"target-pairing", K::kCheckpoint, "--target: the draft's sizes and precision against it",
       TargetPairing},
      {"draft-offset", K::kCheckpoint, "a draft's vLLM layer names are known", DraftOffset},
      {"quantization-config", K::kCheckpoint,
       "quantization_config: formats, schemes, group sizes, keys, patterns",
       QuantizationConfigRule},
      {"module-weights", K::kModule, "quantization tensors come with the values they scale",
       nullptr, ModuleWeights},
      {"not-a-linear", K::kModule, "a module stored quantized is one vLLM builds as a Linear",
       nullptr, NotALinear},
      {"ignore-splits-fused", K::kModule, "the ignore list keeps a fused module's shards together",
       nullptr, IgnoreSplitsFused},
      {"draft-fused-mapping", K::kModule,
       "a draft's ignore list decides the same with and without fused-name expansion", nullptr,
       DraftFusedMapping},
      {"weight-and-packed", K::kModule, "one form of the weight per module", nullptr,
       WeightAndPacked},
      {"quantized-or-dense", K::kModule,
       "a module is stored as vLLM builds it: quantized where a group targets it and nothing "
       "ignores it, dense elsewhere",
       nullptr, QuantizedOrDense},
      {"quantized-router", K::kModule, "routers vLLM builds without a quant config stay dense",
       nullptr, QuantizedRouter},
      {"embedded-draft-dense", K::kModule,
       "a draft embedded in its target that vLLM builds with quantization_config None stays dense",
       nullptr, QuantizedEmbeddedDraft},
      {"family-keeps-dense", K::kModule, "the modules the family keeps dense are dense", nullptr,
       FamilyKeepsDense},
      {"module-tensors", K::kModule,
       "a quantized module's tensors: names, dtypes, shapes, scale values (read once, while the "
       "view is built)",
       nullptr, ModuleTensorsRule},
      {"fused-agreement", K::kCheckpoint,
       "the shards of a fused module agree: all quantized or all dense, one scale dtype, one "
       "global scale",
       FusedAgreement, nullptr, true},
      {"pack-quantized-kernels", K::kCheckpoint,
       "a WNA16 kernel of the release judged takes each pack-quantized GEMM at --tp",
       PackQuantizedKernels, nullptr, true},
      {"format-kernels", K::kCheckpoint,
       "vLLM's kernel rules of the other registry formats, for each GEMM at --tp", FormatKernels,
       nullptr, true},
      {"ignore-entries", K::kCheckpoint, "every ignore entry matches a module by vLLM's names",
       IgnoreEntries, nullptr, true},
      {"targets-match", K::kCheckpoint, "every named target matches a module by vLLM's names",
       TargetsMatch, nullptr, true},
      {"map-release", K::kCheckpoint, "the module map is the release's own", MapRelease},
      {"speculators-format", K::kCheckpoint, "the release reads the speculators format",
       SpeculatorsFormatRule, nullptr, true},
      {"map-architecture", K::kCheckpoint, "the release and its map know the architecture",
       MapArchitecture},
      {"draft-quant-config-owner", K::kCheckpoint,
       "a draft vLLM builds under the target's quantization config", DraftQuantConfigOwner, nullptr,
       true},
      {"map-modules", K::kCheckpoint,
       "each module stored quantized is one the map shows vLLM build quantized", MapModules,
       nullptr, true},
      {"mtp-layer-bits", K::kCheckpoint, "MTP layers at 4 bits or fewer", MtpLayerBits, nullptr,
       true},
      {"unstored-params", K::kCheckpoint,
       "parameters the architecture's load_weights requires are stored", UnstoredParams, nullptr,
       true},
      {"vllm-release-drafts", K::kCheckpoint,
       "the draft rules that depend on the vLLM release (check/vllm_rules.h)", VllmReleaseDrafts},
      {"vllm-tree-scan", K::kVllmTree,
       "`check --vllm DIR` alone: the tree's model code for unguarded blockers of quantized "
       "drafts"},
  };
  return kRules;
}

const CheckRule& RuleNamed(std::string_view name) {
  for (const CheckRule& rule : CheckRules()) {
    if (rule.name == name) return rule;
  }
  std::fprintf(stderr, "internal error: no check rule named %.*s\n", static_cast<int>(name.size()),
               name.data());
  std::abort();
}

std::vector<FindingCode> CodesOf(const CheckRule& rule) {
  std::vector<FindingCode> codes;
  for (const FindingCodeRow& row : kFindingCodes) {
    for (std::string_view name : RulesOf(row)) {
      if (name == rule.name) codes.push_back(row.id);
    }
  }
  return codes;
}

std::string RulesMarkdown() {
  std::string out = "| rule | runs | what it checks | codes |\n|---|---|---|---|\n";
  for (const CheckRule& rule : CheckRules()) {
    const char* runs = rule.kind == RuleKind::kLoad         ? "reading the files"
                       : rule.kind == RuleKind::kCheckpoint ? "once"
                       : rule.kind == RuleKind::kModule     ? "per module"
                                                            : "`check --vllm DIR` alone";
    std::string codes;
    for (FindingCode code : CodesOf(rule)) {
      codes += fmt::format("{}`{}`", codes.empty() ? "" : ", ", CodeName(code));
    }
    out += fmt::format("| `{}` | {} | {} | {} |\n", rule.name, runs, rule.doc, codes);
  }
  return out;
}

namespace {

[[maybe_unused]] bool RuleRaises(const CheckRule* rule, std::string_view code) {
  if (rule == nullptr) return false;
  for (const FindingCodeRow& row : kFindingCodes) {
    if (row.code != code) continue;
    for (std::string_view name : RulesOf(row)) {
      if (name == rule->name) return true;
    }
  }
  return false;
}

}  // namespace

void FindingSink::Push(Finding f) {
  assert(RuleRaises(rule_, f.code) && "a rule raised a code whose row does not name it");
  if (!reported_.insert(f.code + "\n" + f.module + "\n" + f.file).second) return;
  findings_->push_back(std::move(f));
  raised_by_.push_back(rule_);
}

bool NeedsEveryShard(const CheckRule& rule) {
  return rule.kind == RuleKind::kModule || rule.needs_every_shard;
}

std::vector<std::string> RunCheckRules(const CheckView& view, FindingSink& sink) {
  const std::vector<CheckRule>& rules = CheckRules();
  std::vector<std::string> not_run;
  for (size_t i = 0; i < rules.size(); ++i) {
    if (!view.unreadable_shards.empty() && NeedsEveryShard(rules[i])) {
      not_run.emplace_back(rules[i].name);
    } else if (rules[i].kind == RuleKind::kCheckpoint) {
      sink.Enter(rules[i]);
      rules[i].run(view, sink);
    } else if (rules[i].kind == RuleKind::kModule) {
      size_t end = i;
      while (end < rules.size() && rules[end].kind == RuleKind::kModule) ++end;
      for (const ModuleEntry& module : view.modules) {
        for (size_t r = i; r < end; ++r) {
          sink.Enter(rules[r]);
          rules[r].run_module(view, module, sink);
        }
      }
      i = end - 1;
    }
  }
  return not_run;
}

void VllmReleaseDrafts(const CheckView& v, FindingSink& sink) {
  for (Finding& f : CheckDraftAgainstVllm(v.draft, v.vllm)) sink.Push(std::move(f));
}

namespace {

// The report's header: what the view says about the checkpoint and the vLLM judged.
void FillReport(const CheckView& v, CheckReport* r) {
  r->vllm_version = v.vllm.version.text;
  r->vllm_version_source = v.vllm.version_source;
  r->vllm_tree = v.vllm.tree;
  r->shards = v.reader_files;
  if (!v.config_loaded) return;
  r->family = std::string(FamilyName(v.family.family));
  r->naming = v.naming.ToString();
  r->scheme = v.quant.label;
  r->quantized_modules = v.quantized_modules;
  r->dense_linear_modules = v.dense_linear_modules;
  r->module_map_source = v.module_map_source;
  if (v.map.map != nullptr) {
    r->module_map = v.map.map->release;
    r->module_map_architecture = v.map.architecture != nullptr ? v.map.architecture->name
                                 : v.map.mtp != nullptr        ? v.map.mtp->name
                                                               : "";
  }
  r->serve = v.serve;
}

}  // namespace

Result<CheckRun> RunCheck(FileSystem* fs, const CheckOptions& options) {
  SPK_ASSIGN_OR_RETURN(std::string dir, ResolveModelPath(fs, options.checkpoint));
  if (options.tp < 1) return Status::Usage("--tp must be at least 1");
  CheckRun run;
  run.report.path = dir;
  FindingSink sink(&run.report.findings);
  SPK_ASSIGN_OR_RETURN(std::unique_ptr<CheckView> view, LoadCheckView(fs, options, dir, sink));
  if (view->config_loaded) run.report.rules_not_run = RunCheckRules(*view, sink);
  FillReport(*view, &run.report);
  run.report.unreadable_shards = view->unreadable_shards;
  run.raised_by = sink.raised_by();
  return run;
}

}  // namespace spk::check_internal
