// `sparkulator compare SRC QUANTIZED [--html FILE] [--json]`: per-layer error of a quantized
// checkpoint against its source, worst layers first, with an optional self-contained HTML report.
#include <cstdio>
#include <memory>

#include "check/compare.h"
#include "commands.h"
#include "io/fs_util.h"

namespace spk::cli {

void AddCompareCommand(CLI::App& app, CommandBody* run) {
  auto options = std::make_shared<CompareOptions>();
  auto html = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto top = std::make_shared<size_t>(20);
  CLI::App* sub = app.add_subcommand(
      "compare",
      "Per-layer error of QUANTIZED against SRC: relative Frobenius error, SNR, cosine, max "
      "abs error, clipped fraction and the error of Y = X W^T on random inputs; worst first.");
  sub->add_option("SRC", options->source, "The dense source checkpoint")->required();
  sub->add_option("QUANTIZED", options->quantized, "The quantized checkpoint")->required();
  sub->add_option("--html", *html, "Also write a self-contained HTML report with charts");
  sub->add_option("--samples", options->samples, "Random input rows for the output error");
  sub->add_option("--seed", options->seed, "Seed of the random inputs");
  sub->add_option("--top", *top, "Layers shown in the text report");
  sub->add_flag("--json", *json, "Print the report as JSON");
  sub->callback([=] {
    *run = [=] {
      auto report = CompareCheckpoints(FileSystem::Default(), *options);
      if (!report.ok()) return ReportError(report.status());
      if (!html->empty()) {
        Status written = WriteWholeFile(*html, CompareReportHtml(*report));
        if (!written.ok()) return ReportError(written);
      }
      if (*json) {
        std::printf("%s\n", CompareReportToJson(*report).dump(2).c_str());
      } else {
        std::fputs(RenderCompareReport(*report, *top).c_str(), stdout);
        if (!html->empty()) std::printf("\nHTML report: %s\n", html->c_str());
      }
      return 0;
    };
  });
}

}  // namespace spk::cli
