// The reports of `compare`: JSON (--json, and the golden files of tests/golden/), text for the
// terminal, and a self-contained HTML page with inline SVG bar charts (no script), for one
// quantized checkpoint (CompareReport) and for the gain of a second one (GainReport).
//
// Pure functions over the reports compare/compare.h computes; thread-safe. No errors: every report
// renders. JSON has no infinity, so an exact layer's SNR (and a ratio over an exact Q) is null.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "compare/compare.h"

namespace spk {

// `with_paths` false leaves out the two folder paths (golden files).
nlohmann::ordered_json CompareReportToJson(const CompareReport& report, bool with_paths = true);
std::string RenderCompareReport(const CompareReport& report, size_t top = 20);
std::string CompareReportHtml(const CompareReport& report);

nlohmann::ordered_json GainReportToJson(const GainReport& report, bool with_paths = true);
std::string RenderGainReport(const GainReport& report, size_t top = 20);
std::string GainReportHtml(const GainReport& report);

}  // namespace spk
