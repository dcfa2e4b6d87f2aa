// Internal to `sparkulator check` (not a public header): the rules table. One row per rule: its
// name (kebab-case, shown in docs/check.md), its kind, one line of doc and its function over the
// immutable CheckView (check/check_view.h). The codes a rule may raise are the finding-code rows
// whose `raised_by` names it (check/finding_codes.h: one fact, one place); CodesOf reads them. The
// FindingSink asserts (debug builds) that a rule raises only those and records which rule raised
// each finding; check_rules_test.cc checks the two tables agree and that the findings of planted
// faults each come from a rule their row names, in table order.
//
// RunCheckRules runs the rows in table order, which is the order the findings are reported in:
// kCheckpoint rows once over the view; a block of kModule rows for each module in name order, every
// row of the block for one module before the next module. When a shard could not be read (its
// safetensors-invalid finding fails the check), the rows that need every shard do not run and the
// report names them (CheckReport::rules_not_run) instead of reporting that shard's tensors missing.
// kLoad rows are the steps of LoadCheckView, which names them when it reports what reading the
// files finds; the kVllmTree row is `check --vllm DIR` alone, not run over a checkpoint:
// InspectVllmSource (check/vllm_source.h) enters it in its own sink, so its codes are held to the
// row like every other rule's.
//
// The table is static and read-only; a FindingSink belongs to one check, one thread. Errors: a
// rule cannot fail (every problem is a Finding); RunCheck fails as CheckCheckpoint does.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "check/check.h"
#include "check/check_view.h"
#include "check/finding_codes.h"

namespace spk::check_internal {

enum class RuleKind {
  kLoad,        // a step of LoadCheckView
  kCheckpoint,  // run once over the view
  kModule,      // run for each module of the checkpoint
  kVllmTree,    // `check --vllm DIR` alone
};

struct CheckRule {
  std::string_view name;
  RuleKind kind;
  std::string_view doc;                                                              // one line
  void (*run)(const CheckView&, FindingSink&) = nullptr;                             // kCheckpoint
  void (*run_module)(const CheckView&, const ModuleEntry&, FindingSink&) = nullptr;  // kModule
  // A kCheckpoint rule that judges the set of stored tensors (what is there, what is missing).
  // With a shard unreadable that set is incomplete and such a rule would report tensors of that
  // shard as missing, so it does not run; kModule rules are all of this kind.
  bool needs_every_shard = false;
};
bool NeedsEveryShard(const CheckRule& rule);

// The rules in run order.
const std::vector<CheckRule>& CheckRules();
const CheckRule& RuleNamed(std::string_view name);  // REQUIRES: a name of the table
// The codes whose row's raised_by names `rule`.
std::vector<FindingCode> CodesOf(const CheckRule& rule);

// docs/check.md's list of the rules in run order (between <!-- check-rules:begin --> and
// <!-- check-rules:end -->), without the markers.
std::string RulesMarkdown();

// Where the findings of a check go: in order, one per (code, module, file) (fused layers are
// reached once per shard), each with the rule that raised it.
class FindingSink {
 public:
  explicit FindingSink(std::vector<Finding>* findings) : findings_(findings) {}
  // The rule whose findings follow.
  void Enter(const CheckRule& rule) { rule_ = &rule; }

  // A finding of a row of check/finding_codes.h: a code of one severity alone, else the code and
  // the severity (one of the row's).
  void Add(FixedCode code, std::string module, std::string file, std::string message,
           std::string fix) {
    Push(MakeFinding(code, std::move(module), std::move(file), std::move(message), std::move(fix)));
  }
  void Add(FindingCode code, Severity severity, std::string module, std::string file,
           std::string message, std::string fix) {
    Push(MakeFinding(code, severity, std::move(module), std::move(file), std::move(message),
                     std::move(fix)));
  }
  // A finding made by MakeFinding. REQUIRES: its row's raised_by names the current rule.
  void Push(Finding f);

  // Parallel to the findings: the rule that raised each.
  const std::vector<const CheckRule*>& raised_by() const { return raised_by_; }

 private:
  std::vector<Finding>* findings_;
  std::set<std::string> reported_;
  const CheckRule* rule_ = nullptr;
  std::vector<const CheckRule*> raised_by_;
};

// Returns the names of the rules it did not run (NeedsEveryShard, with a shard unreadable).
std::vector<std::string> RunCheckRules(const CheckView& view, FindingSink& sink);

// A check and, for each finding, the rule that raised it (the tests read it).
struct CheckRun {
  CheckReport report;
  std::vector<const CheckRule*> raised_by;  // parallel to report.findings
};
Result<CheckRun> RunCheck(FileSystem* fs, const CheckOptions& options);

// The rules, by file.
// check_files.cc (the load step index runs it)
void IndexAgainstShards(const CheckView& v, FindingSink& sink);
// check_target.cc
void TargetPairing(const CheckView& v, FindingSink& sink);
// check_config.cc
void DraftOffset(const CheckView& v, FindingSink& sink);
void QuantizationConfigRule(const CheckView& v, FindingSink& sink);
// check_modules.cc: per module
void ModuleWeights(const CheckView& v, const ModuleEntry& m, FindingSink& sink);
void NotALinear(const CheckView& v, const ModuleEntry& m, FindingSink& sink);
void IgnoreSplitsFused(const CheckView& v, const ModuleEntry& m, FindingSink& sink);
void DraftFusedMapping(const CheckView& v, const ModuleEntry& m, FindingSink& sink);
void WeightAndPacked(const CheckView& v, const ModuleEntry& m, FindingSink& sink);
void QuantizedOrDense(const CheckView& v, const ModuleEntry& m, FindingSink& sink);
void QuantizedRouter(const CheckView& v, const ModuleEntry& m, FindingSink& sink);
void QuantizedEmbeddedDraft(const CheckView& v, const ModuleEntry& m, FindingSink& sink);
void FamilyKeepsDense(const CheckView& v, const ModuleEntry& m, FindingSink& sink);
void ModuleTensorsRule(const CheckView& v, const ModuleEntry& m, FindingSink& sink);
// check_modules.cc: over the checkpoint
void IgnoreEntries(const CheckView& v, FindingSink& sink);
void TargetsMatch(const CheckView& v, FindingSink& sink);
void FusedAgreement(const CheckView& v, FindingSink& sink);
// check_formats.cc
// NVFP4: the members of one fused module share one global scale (a part of fused-agreement).
void GlobalScaleAgreement(const std::vector<const LinearModule*>& members, const std::string& fused,
                          FindingSink& sink);
void PackQuantizedKernels(const CheckView& v, FindingSink& sink);
void FormatKernels(const CheckView& v, FindingSink& sink);
// A WNA16 kernel shape finding (no-vllm-kernel, kernel-rule, kernel-rule-platform) as given;
// with --vllm-batch-invariant on a release whose map says such a Linear then loads without a
// kernel, the info finding vllm-batch-invariant-no-kernel in its place. The fix names
// VLLM_BATCH_INVARIANT=1 where it helps, or, with the flag, that it does not.
void AddWna16KernelFinding(const CheckView& v, FindingSink& sink, FixedCode code,
                           std::string module, std::string file, std::string message,
                           std::string fix);
// check_map.cc
void MapRelease(const CheckView& v, FindingSink& sink);
void SpeculatorsFormatRule(const CheckView& v, FindingSink& sink);
void MapArchitecture(const CheckView& v, FindingSink& sink);
void DraftQuantConfigOwner(const CheckView& v, FindingSink& sink);
void MapModules(const CheckView& v, FindingSink& sink);
void MtpLayerBits(const CheckView& v, FindingSink& sink);
void UnstoredParams(const CheckView& v, FindingSink& sink);
// check_rules.cc
void VllmReleaseDrafts(const CheckView& v, FindingSink& sink);

}  // namespace spk::check_internal
