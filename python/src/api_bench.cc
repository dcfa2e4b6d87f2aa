// The rows of the Python bench() and bench_report() (python/src/api.h): `sparkulator bench` and
// `bench report` from Python. The flags become the benchmark's configuration through the CLI's own
// ApplyBenchFlags (tools/bench_flags.h), and the results files are written by its WriteBenchFiles,
// so both sides read and write the same; the results come back as the JSON object `--json FILE`
// writes (a dict in Python), not printed.
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

// A count the benchmark takes as size_t: Usage when negative.
Result<size_t> CountOf(std::string_view name, int64_t value) {
  if (value < 0)
    return Status::Usage(std::string(name) + " = " + std::to_string(value) + " is negative");
  return static_cast<size_t>(value);
}

Result<std::string> RunBenchRow(const ApiRequest& r, RunContext run) {
  cli::BenchFlags flags;
  flags.arms = r.StrList("arms");
  flags.prompt_lengths_given = r.OptionalStr("prompt_lengths").has_value();
  flags.prompt_lengths = r.OptionalStr("prompt_lengths").value_or(flags.prompt_lengths);
  flags.prompts_path = r.OptionalStr("prompts").value_or("");
  flags.ignore_eos = r.Bool("ignore_eos");
  flags.json_path = r.OptionalStr("json_path").value_or("");
  flags.svg_path = r.OptionalStr("svg").value_or("");
  flags.port_range = r.OptionalStr("port_range").value_or("");
  bench::BenchConfig config;
  config.command_line = "sparkulator.bench()";
  if (auto repeats = r.OptionalInt("repeats")) {
    flags.repeats_given = true;
    SPK_ASSIGN_OR_RETURN(config.repeats, CountOf("repeats", *repeats));
  }
  SPK_ASSIGN_OR_RETURN(config.warmup, CountOf("warmup", r.Int("warmup")));
  SPK_ASSIGN_OR_RETURN(config.max_tokens, CountOf("max_tokens", r.Int("max_tokens")));
  config.chat = r.Bool("chat");
  config.model = r.OptionalStr("model").value_or("");
  config.request_timeout_s = r.Float("request_timeout");
  config.launch_timeout_s = r.Float("launch_timeout");
  config.stop_grace_s = r.Float("stop_grace");
  config.log_dir = r.Str("log_dir");
  config.start_reversed = r.Bool("start_reversed");
  config.noisy_relative_mad = r.Float("noisy_mad");
  config.scrape_metrics = r.Bool("metrics");
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
  flags.report_files = r.StrList("files");
  flags.report_json = r.OptionalStr("json_path").value_or("");
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
      .params =
          {{"arms", ParamType::kStrList, "",
            "the arms (``--arm``), the first the baseline: ``NAME=http://host:port`` (a running "
            "server) or ``NAME=cmd:COMMAND`` (launched; ``{port}`` is replaced by a free port)."},
           {"prompt_lengths", ParamType::kOptionalStr, "None",
            "prompt lengths in tokens, comma separated (None: 512,2048,8192)."},
           {"prompts", ParamType::kOptionalPath, "None",
            "a JSONL file of prompts to send instead of the built-in code corpus (``--prompts``; "
            "docs/bench.md)."},
           {"ignore_eos", ParamType::kBool, "False",
            "with ``prompts``: generate exactly ``max_tokens`` tokens, ignoring EOS."},
           {"repeats", ParamType::kOptionalInt, "None",
            "measured requests per arm and prompt length (None: 12, with ``prompts`` the number "
            "of prompts)."},
           {"warmup", ParamType::kInt, "3", "warm-up requests per arm (and per launch)."},
           {"max_tokens", ParamType::kInt, "256",
            "output length in tokens (with ``prompts`` the most a response may have)."},
           {"chat", ParamType::kBool, "False",
            "use /v1/chat/completions (thinking off) instead of /v1/completions."},
           {"model", ParamType::kOptionalStr, "None",
            "the model name to send (None: the first of /v1/models)."},
           {"json_path", ParamType::kOptionalPath, "None",
            "also write the results to this JSON file (``--json FILE``)."},
           {"svg", ParamType::kOptionalPath, "None",
            "write a plot of tok/s by prompt length per arm (SVG)."},
           {"request_timeout", ParamType::kFloat, "300.0",
            "seconds without data before a request counts as failed."},
           {"launch_timeout", ParamType::kFloat, "1200.0",
            "seconds to wait for a launched server's /health."},
           {"stop_grace", ParamType::kFloat, "15.0",
            "seconds between SIGTERM and SIGKILL when stopping a server."},
           {"log_dir", ParamType::kPath, "\".\"", "the folder for launched servers' logs."},
           {"port_range", ParamType::kOptionalStr, "None",
            "``FIRST-LAST`` ports for launched servers' ``{port}`` (None: any free port)."},
           {"start_reversed", ParamType::kBool, "False",
            "start the ABBA schedule with the last arm (alternate this between machines)."},
           {"noisy_mad", ParamType::kFloat, "0.05",
            "flag cells whose relative MAD (MAD / median) exceeds this."},
           {"metrics", ParamType::kBool, "True",
            "read /metrics for the acceptance figures (False is ``--no-metrics``)."}},
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
      .params = {{"files", ParamType::kPathList, "",
                  "results JSON files written by ``bench(json_path=...)`` or ``bench --json``."},
                 {"json_path", ParamType::kOptionalPath, "None",
                  "also write the pooled estimates to this JSON file (``--json FILE``)."}},
      .returns = {{"dict", ""}},
      .returns_doc = "The pooled estimates: the JSON object ``bench report --json FILE`` writes.",
      .raises_doc = "ValueError: a file that is not results JSON. FileNotFoundError: a file not "
                    "found.",
      .run = RunBenchReport});
  return c;
}

}  // namespace spk::python
