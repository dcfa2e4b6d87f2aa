// The vLLM facts `sparkulator check` judges drafts by that depend on the vLLM release: one table
// (VllmRules) of what fails, in which model file, in which versions, how the model code shows it,
// the finding code and the fix; and the vLLM version a check is judged for (--vllm-version V, the
// version of an installed tree given with --vllm DIR, else the newest module map's release).
//
// A rule's verdict comes from the model code when a vLLM tree is given (the code is what runs),
// else from the version ranges, which hold only what was observed: a version between the last one
// seen failing and the first one seen working is "not verified", never guessed, and so is one
// newer than the last seen failing of a rule no version was seen passing (the default release,
// the newest module map's, may be such a one).
// Values and pure functions; thread-safe. Errors: ReadVllmVersion NotFound when DIR holds no vLLM,
// IoError from reading (versions are parsed by vllm/vllm_version.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "check/finding_codes.h"
#include "io/file.h"
#include "vllm/vllm_version.h"

namespace spk {

struct VllmVersionSource {
  std::optional<VllmVersion> version;  // empty: the tree does not say (a source checkout)
  std::string source;                  // the file it was read from, or why it is unknown
};

// The version of the vLLM in DIR (site-packages holding `vllm`, a vLLM source tree, or the
// `vllm` package folder itself): vllm/_version.py, a literal in vllm/version.py, or the
// vllm*.dist-info/METADATA beside the package.
Result<VllmVersionSource> ReadVllmVersion(FileSystem* fs, const std::string& dir);

// How a rule shows in the model file of a vLLM tree.
enum class CodeMarker {
  kUnguardedRead,  // fails where `needle` is used outside an `if` whose condition names `guard`
  kAbsent,         // fails when the file does not contain `guard` (a missing name mapping)
  kDefinition,     // the rule's computation holds when the file contains `needle` verbatim
};

struct VllmRule {
  std::string_view id;          // stable name of the rule
  FindingCode code;             // the row of check/finding_codes.h check reports
  std::string_view model_file;  // under vllm/model_executor/models/
  CodeMarker marker;
  std::string_view needle;
  std::string_view guard;
  std::string_view last_failing;  // newest version seen failing; "" none
  std::string_view
      first_working;            // oldest version seen working; "" none seen (newer: not verified)
  std::string_view evidence;    // where the versions come from
  std::string_view vllm_error;  // what vLLM prints when it fails
  std::string_view fix;
  // kDefinition rules judged by version: the oldest release the computation was read or measured
  // on; older releases are not verified ("" holds in every version).
  std::string_view holds_since;
};

// The table. Rules are looked up by id.
const std::vector<VllmRule>& VllmRules();
const VllmRule& VllmRuleById(std::string_view id);  // REQUIRES: an id of the table

// kFails: vLLM fails as the rule says (for a kDefinition rule: the rule's computation holds, and
// the caller decides from it whether the checkpoint fails).
enum class Verdict { kFails, kWorks, kNotVerified };

struct RuleJudgement {
  Verdict verdict = Verdict::kFails;
  std::string basis;  // "vLLM 0.32.0 (--vllm-version)", "qwen3_dflash.py line 537 is guarded ..."
};

// What the check is judged against: a version, and optionally the tree whose code decides.
struct VllmTarget {
  VllmVersion version;
  std::string version_source;  // "--vllm-version", a file, or "newest verified (default)"
  std::string tree;            // empty: judge by version only
  FileSystem* fs = nullptr;    // reads the tree's files; REQUIRES: non-null when tree is set
};

RuleJudgement JudgeRule(const VllmRule& rule, const VllmTarget& target);

}  // namespace spk
