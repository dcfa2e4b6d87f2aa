#include "check/findings.h"

#include <fmt/format.h>

#include <algorithm>

namespace spk {

std::string_view SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kError:
      return "error";
    case Severity::kWarning:
      return "warning";
    case Severity::kInfo:
      return "info";
  }
  return "error";
}

nlohmann::ordered_json FindingToJson(const Finding& f) {
  return nlohmann::ordered_json{{"severity", SeverityName(f.severity)},
                                {"code", f.code},
                                {"module", f.module},
                                {"file", f.file},
                                {"message", f.message},
                                {"fix", f.fix}};
}

std::string RenderFinding(const Finding& f) {
  std::string where = f.module.empty() ? f.file : f.module;
  if (!f.module.empty() && !f.file.empty()) where += " (" + f.file + ")";
  std::string out = fmt::format("{:<7} {}  {}{}{}\n", SeverityName(f.severity), f.code, where,
                                where.empty() ? "" : ": ", f.message);
  if (!f.fix.empty()) out += fmt::format("        fix: {}\n", f.fix);
  return out;
}

size_t CountSeverity(const std::vector<Finding>& findings, Severity severity) {
  return std::count_if(findings.begin(), findings.end(),
                       [&](const Finding& f) { return f.severity == severity; });
}

}  // namespace spk
