#include "check/finding_codes.h"

#include <fmt/format.h>

#include <cassert>
#include <utility>

namespace spk {

Finding MakeFinding(FixedCode code, std::string module, std::string file, std::string message,
                    std::string fix) {
  return {code.severity(),    std::string(CodeName(code.code)),
          std::move(module),  std::move(file),
          std::move(message), std::move(fix)};
}

Finding MakeFinding(FindingCode code, Severity severity, std::string module, std::string file,
                    std::string message, std::string fix) {
  assert((RowOf(code).severities & SeverityBit(severity)) != 0 &&
         "a severity the finding code's row does not list");
  return {severity,        std::string(CodeName(code)), std::move(module),
          std::move(file), std::move(message),          std::move(fix)};
}

std::string SeveritiesInWords(uint8_t severities) {
  std::string out;
  for (Severity s : {Severity::kError, Severity::kWarning, Severity::kInfo}) {
    if ((severities & SeverityBit(s)) == 0) continue;
    if (!out.empty()) out += " / ";
    out += SeverityName(s);
  }
  return out;
}

std::vector<std::string_view> RulesOf(const FindingCodeRow& row) {
  std::vector<std::string_view> names;
  std::string_view rest = row.raised_by;
  while (!rest.empty()) {
    const size_t comma = rest.find(", ");
    names.push_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 2);
  }
  return names;
}

std::string FindingCodesMarkdown() {
  std::string out = "| code | severity | what | raised by |\n|---|---|---|---|\n";
  for (const FindingCodeRow& row : kFindingCodes) {
    std::string rules;
    for (std::string_view rule : RulesOf(row)) {
      rules += fmt::format("{}`{}`", rules.empty() ? "" : ", ", rule);
    }
    out += fmt::format("| `{}` | {} | {} | {} |\n", row.code, SeveritiesInWords(row.severities),
                       row.doc, rules);
  }
  return out;
}

}  // namespace spk
