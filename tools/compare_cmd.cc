// `sparkulator compare SRC QUANTIZED [QUANTIZED2] [--html FILE] [--json]`: per-layer error of a
// quantized checkpoint against its source, worst layers first, with an optional self-contained HTML
// report. With QUANTIZED2 (another output of the same SRC), both errors and the gain Q2/Q per
// layer, largest gain first, and the total weight SSE ratio.
#include <cstdio>
#include <memory>

#include "command_flags.h"
#include "commands.h"
#include "compare/report.h"
#include "io/fs_util.h"

namespace spk::cli {
namespace {

// Writes the HTML (when asked) and prints JSON or text for either report kind.
template <typename Report, typename ToJson, typename Render, typename Html>
int Emit(const Report& report, const std::string& html, bool json, size_t top, ToJson to_json,
         Render render, Html to_html) {
  if (!html.empty()) {
    Status written = WriteWholeFile(html, to_html(report));
    if (!written.ok()) return ReportError(written);
  }
  if (json) {
    std::printf("%s\n", to_json(report, true).dump(2).c_str());
  } else {
    std::fputs(render(report, top).c_str(), stdout);
    if (!html.empty()) std::printf("\nHTML report: %s\n", html.c_str());
  }
  return 0;
}

// In the order of the CLI's --help and of the Python compare()'s parameters.
constexpr OptionRow<CompareFlags> kCompareRows[] = {
    {"SRC", "src", ParamType::kPath, "", "The dense source checkpoint", &CompareFlags::source},
    {"QUANTIZED", "q", ParamType::kPath, "", "The quantized checkpoint (Q)",
     &CompareFlags::quantized},
    {"QUANTIZED2", "q2", ParamType::kOptionalPath, "None",
     "Optional second quantized checkpoint of SRC (Q2), e.g. --method search output",
     &CompareFlags::quantized2},
    {"--html", "html", ParamType::kOptionalPath, "None",
     "Also write a self-contained HTML report with charts", &CompareFlags::html},
    {"--samples", "samples", ParamType::kOptionalInt, "None",
     "Random input rows for the output error", &CompareFlags::samples},
    {"--seed", "seed", ParamType::kOptionalInt, "None", "Seed of the random inputs",
     &CompareFlags::seed},
};

}  // namespace

std::span<const OptionRow<CompareFlags>> CompareOptionRows() { return kCompareRows; }

void AddCompareCommand(CLI::App& app, CommandBody* run) {
  auto flags = std::make_shared<CompareFlags>();
  auto json = std::make_shared<bool>(false);
  auto top = std::make_shared<size_t>(20);
  CLI::App* sub = app.add_subcommand(
      "compare",
      "Per-layer error of QUANTIZED against SRC: relative Frobenius error, SNR, cosine, max "
      "abs error, clipped fraction and the error of Y = X W^T on random inputs; worst first. "
      "With QUANTIZED2 (another output of SRC): both errors and the squared-error ratio Q2/Q per "
      "layer, largest gain first, and the total weight SSE ratio.");
  AddOptionRows(sub, CompareOptionRows(), flags.get());
  // CLI only: Python's report object holds every layer.
  sub->add_option("--top", *top, "Layers shown in the text report");
  sub->add_flag("--json", *json, "Print the report as JSON");
  sub->callback([=] {
    *run = [=] {
      if (!flags->quantized2.empty()) {
        auto report = CompareGain(RunContext{}, *flags, flags->quantized2);
        if (!report.ok()) return ReportError(report.status());
        return Emit(*report, flags->html, *json, *top, GainReportToJson, RenderGainReport,
                    GainReportHtml);
      }
      auto report = CompareCheckpoints(RunContext{}, *flags);
      if (!report.ok()) return ReportError(report.status());
      return Emit(*report, flags->html, *json, *top, CompareReportToJson, RenderCompareReport,
                  CompareReportHtml);
    };
  });
}

}  // namespace spk::cli
