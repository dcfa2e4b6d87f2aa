// Findings: what `sparkulator check` reports about a checkpoint, one problem each, with how bad it
// is, where it is (module and/or file), what vLLM would do, and the fix.
//
// `code` is a stable identifier (kebab-case, e.g. "ignore-matches-nothing") that scripts and tests
// match on; the messages may change. Values only; thread-safe. No errors: rendering cannot fail.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace spk {

// kError: vLLM fails to load the checkpoint, or loads it wrong (exit 1).
// kWarning: it loads right, but something is likely unintended (slow, fragile, skipped).
// kInfo: context (the family, the naming, the scheme).
enum class Severity { kError, kWarning, kInfo };
std::string_view SeverityName(Severity severity);

struct Finding {
  Severity severity = Severity::kError;
  std::string code;
  std::string module;  // checkpoint module (or vLLM module, when that is what the rule is about)
  std::string file;    // file name inside the checkpoint folder, when the finding is about a file
  std::string message;
  std::string fix;
};

nlohmann::ordered_json FindingToJson(const Finding& finding);

// "error   missing-weight-scale  layers.0.mlp.up_proj: <message>\n        fix: <fix>\n".
std::string RenderFinding(const Finding& finding);

// Number of findings of `severity`.
size_t CountSeverity(const std::vector<Finding>& findings, Severity severity);

}  // namespace spk
