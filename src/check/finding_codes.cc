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

std::string FindingCodesMarkdown() {
  std::string out = "| code | severity | what | raised by |\n|---|---|---|---|\n";
  for (const FindingCodeRow& row : kFindingCodes) {
    out += fmt::format("| `{}` | {} | {} | {} |\n", row.code, SeveritiesInWords(row.severities),
                       row.doc, row.raised_by);
  }
  return out;
}

}  // namespace spk
