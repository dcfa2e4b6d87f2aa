// `sparkulator card CKPT [--bench RESULTS.json ...] [--check] [--vllm DIR] [-o README.md]`: the
// model card of a quantized checkpoint (src/card/card.h); this file declares flags and writes
// files.
#include <cstdio>
#include <memory>

#include "card/card.h"
#include "commands.h"
#include "io/atomic_dir.h"
#include "io/file.h"

namespace spk::cli {
namespace {

struct CardFlags {
  card::CardOptions options;
  std::string output;
  bool update = false;
};

int RunCard(FileSystem* fs, CardFlags flags) {
  std::string existing;
  if (!flags.output.empty() && fs->Exists(flags.output)) {
    if (!flags.update) {
      return ReportError(Status::AlreadyExists(
          flags.output +
          " exists: pass --update to keep its prose and replace the generated "
          "part, or -o another file"));
    }
    auto text = fs->ReadFile(flags.output);
    if (!text.ok()) return ReportError(text.status());
    existing = *text;
  }
  if (!flags.output.empty()) {  // each results file's chart goes beside the card
    for (size_t i = 0; i < flags.options.bench_files.size(); ++i) {
      flags.options.chart_files.push_back("bench-" + std::to_string(i + 1) + ".svg");
    }
  }
  auto card = card::MakeCard(RunContext{.fs = fs}, flags.options, existing);
  if (!card.ok()) return ReportError(card.status());
  if (flags.output.empty()) {
    std::fputs(card->markdown.c_str(), stdout);
  } else {
    const std::string dir = Dirname(flags.output);
    for (size_t i = 0; i < card->chart_svgs.size(); ++i) {
      if (card->chart_svgs[i].empty()) continue;
      Status s =
          WriteFileAtomically(fs, JoinPath(dir, flags.options.chart_files[i]), card->chart_svgs[i]);
      if (!s.ok()) return ReportError(s);
    }
    Status s = WriteFileAtomically(fs, flags.output, card->markdown);
    if (!s.ok()) return ReportError(s);
    std::fprintf(stderr, "wrote %s\n", flags.output.c_str());
  }
  return card->check_errors > 0 ? 1 : 0;
}

}  // namespace

void AddCardCommand(CLI::App& app, CommandBody* run) {
  auto flags = std::make_shared<CardFlags>();
  CLI::App* sub = app.add_subcommand(
      "card",
      "Write the Hugging Face model card (README.md) of a checkpoint written by `sparkulator "
      "quantize`: front matter, pairing, sizes, recipe, modules kept dense, the vllm serve line, "
      "and with --bench the benchmark tables and memory per arm. No network.");
  sub->add_option("CKPT", flags->options.checkpoint, "The quantized checkpoint folder")
      ->required()
      ->check(CLI::ExistingDirectory);
  sub->add_option("--bench", flags->options.bench_files,
                  "Results of `sparkulator bench --json`, one file per machine (repeat)")
      ->check(CLI::ExistingFile);
  sub->add_option("-o,--output", flags->output,
                  "Write the card here (and each machine's chart as bench-N.svg beside it); "
                  "default: stdout");
  sub->add_flag("--update", flags->update,
                "Update the existing -o file: keep its prose and foreign front-matter keys, "
                "replace the generated part");
  sub->add_option("--target", flags->options.target,
                  "The target model for the vllm serve line (a Hub id or a path)");
  sub->add_option("--repo-id", flags->options.repo_id,
                  "The Hub id this checkpoint will be published as (used in the serve line)");
  sub->add_option("--base-model", flags->options.base_model,
                  "The Hub id of the source (default: derived from the source quantize recorded)");
  sub->add_flag("--check", flags->options.check,
                "Run `sparkulator check` and list its findings in the card (exit 1 on errors)");
  sub->add_option("--vllm", flags->options.vllm_dir,
                  "An installed vLLM (site-packages) or source tree: the patches `check --vllm` "
                  "reports go into the card")
      ->check(CLI::ExistingDirectory);
  sub->callback(
      [run, flags] { *run = [flags] { return RunCard(FileSystem::Default(), *flags); }; });
}

}  // namespace spk::cli
