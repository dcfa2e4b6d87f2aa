// `sparkulator card CKPT [--bench RESULTS.json ...] [--check] [--vllm DIR] [-o README.md]`: the
// model card of a quantized checkpoint (src/card/card.h); this file declares flags and prints,
// WriteCard (card_write.h, shared with the Python card()) writes the files.
#include <cstdio>
#include <memory>

#include "card_write.h"
#include "commands.h"
#include "io/atomic_dir.h"
#include "io/file.h"

namespace spk::cli {

Result<WrittenCard> WriteCard(FileSystem* fs, CardRequest request) {
  std::string existing;
  if (!request.output.empty() && fs->Exists(request.output)) {
    if (!request.update) {
      return Status::AlreadyExists(request.output +
                                   " exists: pass --update to keep its prose and replace the "
                                   "generated part, or -o another file");
    }
    SPK_ASSIGN_OR_RETURN(existing, fs->ReadFile(request.output));
  }
  if (!request.output.empty()) {  // each results file's chart goes beside the card
    for (size_t i = 0; i < request.bench_files.size(); ++i) {
      request.chart_files.push_back("bench-" + std::to_string(i + 1) + ".svg");
    }
  }
  WrittenCard written;
  SPK_ASSIGN_OR_RETURN(written.card, card::MakeCard(RunContext{.fs = fs}, request, existing));
  if (request.output.empty()) return written;
  const std::string dir = Dirname(request.output);
  for (size_t i = 0; i < written.card.chart_svgs.size(); ++i) {
    if (written.card.chart_svgs[i].empty()) continue;
    std::string chart = JoinPath(dir, request.chart_files[i]);
    SPK_RETURN_IF_ERROR(WriteFileAtomically(fs, chart, written.card.chart_svgs[i]));
    written.files.push_back(std::move(chart));
  }
  SPK_RETURN_IF_ERROR(WriteFileAtomically(fs, request.output, written.card.markdown));
  written.files.push_back(request.output);
  return written;
}

namespace {

int RunCard(FileSystem* fs, const CardRequest& request) {
  auto written = WriteCard(fs, request);
  if (!written.ok()) return ReportError(written.status());
  if (request.output.empty()) {
    std::fputs(written->card.markdown.c_str(), stdout);
  } else {
    std::fprintf(stderr, "wrote %s\n", request.output.c_str());
  }
  return written->card.check_errors > 0 ? 1 : 0;
}

// In the order of the CLI's --help and of the Python card()'s parameters.
constexpr OptionRow<CardRequest> kCardRows[] = {
    {"CKPT", "ckpt", ParamType::kPath, "", "The quantized checkpoint folder",
     &CardRequest::checkpoint},
    {"--bench", "bench", ParamType::kPathList, "()",
     "Results of `sparkulator bench --json`, one file per machine (repeat)",
     &CardRequest::bench_files},
    {"-o,--output", "output", ParamType::kOptionalPath, "None",
     "Write the card here (and each machine's chart as bench-N.svg beside it); default: stdout",
     &CardRequest::output},
    {"--update", "update", ParamType::kBool, "False",
     "Update the existing -o file: keep its prose and foreign front-matter keys, replace the "
     "generated part",
     &CardRequest::update},
    {"--target", "target", ParamType::kOptionalStr, "None",
     "The target model for the vllm serve line (a Hub id or a path)", &CardRequest::target},
    {"--repo-id", "repo_id", ParamType::kOptionalStr, "None",
     "The Hub id this checkpoint will be published as (used in the serve line)",
     &CardRequest::repo_id},
    {"--base-model", "base_model", ParamType::kOptionalStr, "None",
     "The Hub id of the source (default: derived from the source quantize recorded)",
     &CardRequest::base_model},
    {"--check", "check", ParamType::kBool, "False",
     "Run `sparkulator check` and list its findings in the card (exit 1 on errors)",
     &CardRequest::check},
    {"--vllm", "vllm", ParamType::kOptionalPath, "None",
     "An installed vLLM (site-packages) or source tree: the patches `check --vllm` reports go "
     "into the card",
     &CardRequest::vllm_dir},
};

}  // namespace

std::span<const OptionRow<CardRequest>> CardOptionRows() { return kCardRows; }

void AddCardCommand(CLI::App& app, CommandBody* run) {
  auto flags = std::make_shared<CardRequest>();
  CLI::App* sub = app.add_subcommand(
      "card",
      "Write the Hugging Face model card (README.md) of a checkpoint written by `sparkulator "
      "quantize`: front matter, pairing, sizes, recipe, modules kept dense, the vllm serve line, "
      "and with --bench the benchmark tables and memory per arm. No network.");
  AddOptionRows(sub, CardOptionRows(), flags.get());
  // Checked while parsing, on the CLI only: Python's card() leaves them to the library, which
  // raises FileNotFoundError.
  sub->get_option("CKPT")->check(CLI::ExistingDirectory);
  sub->get_option("--bench")->check(CLI::ExistingFile);
  sub->get_option("--vllm")->check(CLI::ExistingDirectory);
  sub->callback(
      [run, flags] { *run = [flags] { return RunCard(FileSystem::Default(), *flags); }; });
}

}  // namespace spk::cli
