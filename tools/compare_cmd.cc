// `sparkulator compare SRC QUANTIZED [QUANTIZED2] [--html FILE] [--json]`: per-layer error of a
// quantized checkpoint against its source, worst layers first, with an optional self-contained HTML
// report. With QUANTIZED2 (another output of the same SRC), both errors and the gain Q2/Q per
// layer, largest gain first, and the total weight SSE ratio.
#include <cstdio>
#include <memory>

#include "commands.h"
#include "compare/compare.h"
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

}  // namespace

void AddCompareCommand(CLI::App& app, CommandBody* run) {
  auto options = std::make_shared<CompareOptions>();
  auto quantized2 = std::make_shared<std::string>();
  auto html = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto top = std::make_shared<size_t>(20);
  CLI::App* sub = app.add_subcommand(
      "compare",
      "Per-layer error of QUANTIZED against SRC: relative Frobenius error, SNR, cosine, max "
      "abs error, clipped fraction and the error of Y = X W^T on random inputs; worst first. "
      "With QUANTIZED2 (another output of SRC): both errors and the squared-error ratio Q2/Q per "
      "layer, largest gain first, and the total weight SSE ratio.");
  sub->add_option("SRC", options->source, "The dense source checkpoint")->required();
  sub->add_option("QUANTIZED", options->quantized, "The quantized checkpoint (Q)")->required();
  sub->add_option("QUANTIZED2", *quantized2,
                  "Optional second quantized checkpoint of SRC (Q2), e.g. --method search output");
  sub->add_option("--html", *html, "Also write a self-contained HTML report with charts");
  sub->add_option("--samples", options->samples, "Random input rows for the output error");
  sub->add_option("--seed", options->seed, "Seed of the random inputs");
  sub->add_option("--top", *top, "Layers shown in the text report");
  sub->add_flag("--json", *json, "Print the report as JSON");
  sub->callback([=] {
    *run = [=] {
      if (!quantized2->empty()) {
        auto report = CompareGain(RunContext{}, *options, *quantized2);
        if (!report.ok()) return ReportError(report.status());
        return Emit(*report, *html, *json, *top, GainReportToJson, RenderGainReport,
                    GainReportHtml);
      }
      auto report = CompareCheckpoints(RunContext{}, *options);
      if (!report.ok()) return ReportError(report.status());
      return Emit(*report, *html, *json, *top, CompareReportToJson, RenderCompareReport,
                  CompareReportHtml);
    };
  });
}

}  // namespace spk::cli
