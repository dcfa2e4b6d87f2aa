// The rows of the Python bench() and bench_report() (python/src/api.h): `sparkulator bench` and
// `bench report` from Python. Their parameters are the CLI's option rows (tools/bench_flags.h),
// read into the CLI's BenchFlags; the flags become the benchmark's configuration through the CLI's
// own ApplyBenchFlags, and the results files are written by its WriteBenchFiles, so both sides
// read and write the same; the results come back as the JSON object `--json FILE` writes (a dict
// in Python), not printed.
//
// Errors: the library's Status (a bad flag is Usage naming it; Ctrl-C is Cancelled, after the
// launched servers were stopped and the results gathered so far written, as the CLI does). Failed
// requests are not an error: they are counted in each arm's "failures" (where the CLI exits 1).
#include <cstdio>
#include <string>

#include "api.h"
#include "bench/runner.h"
#include "bench_flags.h"

namespace spk::python {
namespace {

ApiParam Bench(std::string_view name) { return ParamOf(cli::BenchOptionRows(), name); }
ApiParam Report(std::string_view name) { return ParamOf(cli::BenchReportOptionRows(), name); }

Result<std::string> RunBenchRow(const ApiRequest& r, RunContext run) {
  cli::BenchFlags flags;
  SPK_RETURN_IF_ERROR(r.ReadOptionRows(cli::BenchOptionRows(), &flags));
  flags.command_line = "sparkulator.bench()";
  flags.repeats_given = r.OptionalInt("repeats").has_value();
  flags.prompt_lengths_given = r.OptionalStr("prompt_lengths").has_value();
  bench::BenchConfig config;
  SPK_RETURN_IF_ERROR(cli::ApplyBenchFlags(run.fs, flags, &config));
  auto progress = [](const std::string& line) {
    std::fprintf(stderr, "bench: %s\n", line.c_str());
  };
  nlohmann::json partial;
  Result<nlohmann::json> results = bench::RunBench(run, config, progress, &partial);
  if (!results.ok()) {
    if (partial.is_object() && partial.contains("requests") && !partial["requests"].empty()) {
      (void)cli::WriteBenchFiles(run.fs, partial, flags);  // the error below says what failed
    }
    return results.status();
  }
  SPK_RETURN_IF_ERROR(cli::WriteBenchFiles(run.fs, *results, flags));
  return results->dump();
}

Result<std::string> RunBenchReport(const ApiRequest& r, RunContext run) {
  cli::BenchFlags flags;
  SPK_RETURN_IF_ERROR(r.ReadOptionRows(cli::BenchReportOptionRows(), &flags));
  SPK_ASSIGN_OR_RETURN(nlohmann::json pooled, cli::PoolResultsFiles(run.fs, flags));
  return pooled.dump();
}

}  // namespace

std::vector<ApiCommand> BenchApiCommands() {
  std::vector<ApiCommand> c;
  c.push_back(ApiCommand{
      .name = "bench",
      .doc = "Counterbalanced A/B decode benchmark of OpenAI-compatible servers (``sparkulator "
             "bench``; docs/bench.md). Progress lines go to stderr.",
      .params = {Bench("arms"), Bench("prompt_lengths"), Bench("prompts"), Bench("ignore_eos"),
                 Bench("repeats"), Bench("warmup"), Bench("max_tokens"), Bench("chat"),
                 Bench("model"), Bench("json_path"), Bench("svg"), Bench("request_timeout"),
                 Bench("launch_timeout"), Bench("stop_grace"), Bench("log_dir"),
                 Bench("port_range"), Bench("start_reversed"), Bench("noisy_mad"),
                 Bench("metrics")},
      .returns = {{"dict", ""}},
      .returns_doc = "The results: the JSON object ``--json FILE`` writes (every request and the "
                     "analysis; each arm's ``failures`` counts failed requests, where the CLI "
                     "exits 1).",
      .raises_doc = "ValueError: bad arguments or no server reached. OSError: a file could not "
                    "be written. KeyboardInterrupt: Ctrl-C (launched servers are stopped, the "
                    "results so far written).",
      .run = RunBenchRow});
  c.push_back(ApiCommand{
      .name = "bench_report",
      .doc = "Results files of several machines pooled (``sparkulator bench report FILES``: "
             "inverse-variance weighted log ratios).",
      .params = {Report("files"), Report("json_path")},
      .returns = {{"dict", ""}},
      .returns_doc = "The pooled estimates: the JSON object ``bench report --json FILE`` writes.",
      .raises_doc = "ValueError: a file that is not results JSON. FileNotFoundError: a file not "
                    "found.",
      .run = RunBenchReport});
  return c;
}

}  // namespace spk::python
