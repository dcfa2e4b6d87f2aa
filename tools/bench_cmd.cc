// `sparkulator bench`: counterbalanced A/B decode benchmark of speculative-decoding servers, and
// `sparkulator bench report`: pooling of results files from several machines. The method is in
// docs/bench.md; this file declares the flags, and (bench_flags.h, shared with the Python bench())
// reads them into the benchmark's configuration and writes the results files.
#include <fmt/format.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <sstream>

#include "bench/prompt_file.h"
#include "bench/report.h"
#include "bench/runner.h"
#include "bench_flags.h"
#include "commands.h"
#include "io/atomic_dir.h"
#include "io/file.h"

namespace spk::cli {
namespace {

std::atomic<bool> g_interrupted{false};

void OnSigint(int) {
  g_interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

Status WriteOutputs(FileSystem* fs, const nlohmann::json& results, const BenchFlags& flags) {
  std::fputs(bench::RenderMarkdown(results).c_str(), stdout);
  std::fflush(stdout);
  return WriteBenchFiles(fs, results, flags);
}

int RunReport(FileSystem* fs, const BenchFlags& flags) {
  auto pooled = PoolResultsFiles(fs, flags);
  if (!pooled.ok()) return ReportError(pooled.status());
  std::fputs(bench::RenderPooledMarkdown(*pooled).c_str(), stdout);
  return 0;
}

int RunMain(FileSystem* fs, const BenchFlags& flags) {
  bench::BenchConfig config;
  Status applied = ApplyBenchFlags(fs, flags, &config);
  if (!applied.ok()) return ReportError(applied);

  struct sigaction action {};
  action.sa_handler = OnSigint;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a blocking poll returns at once
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  auto progress = [](const std::string& line) {
    std::fprintf(stderr, "bench: %s\n", line.c_str());
  };
  nlohmann::json partial;
  auto results =
      bench::RunBench(RunContext{.fs = fs, .cancel = &g_interrupted}, config, progress, &partial);
  std::signal(SIGINT, SIG_DFL);
  if (results.ok()) {
    Status written = WriteOutputs(fs, *results, flags);
    if (!written.ok()) return ReportError(written);
    size_t failures = 0;
    for (const auto& arm : (*results)["arms"]) failures += arm["failures"].get<size_t>();
    if (failures > 0) {
      std::fprintf(stderr,
                   "sparkulator: %zu measured request(s) failed; see \"error\" in the results\n",
                   failures);
      return 1;
    }
    return 0;
  }
  if (partial.is_object() && partial.contains("requests") && !partial["requests"].empty()) {
    std::fprintf(stderr, "sparkulator: writing the results gathered so far\n");
    Status written = WriteOutputs(fs, partial, flags);
    if (!written.ok()) ReportError(written);
  }
  if (results.status().code() == StatusCode::kCancelled) {
    std::fprintf(stderr, "sparkulator: interrupted; launched servers were stopped\n");
  }
  return ReportError(results.status());
}

}  // namespace

namespace {

// --prompts: the file is read and checked whole here, before any server is reached.
Status ApplyPromptsFile(FileSystem* fs, const BenchFlags& flags, bench::BenchConfig* config) {
  if (flags.prompt_lengths_given) {
    return Status::Usage(
        "--prompt-lengths and --prompts: the file's prompts replace the length grid; give one");
  }
  if (config->chat) {
    return Status::Usage(
        "--chat and --prompts: each line of the file chooses its endpoint (\"messages\": chat, "
        "\"prompt\": completions)");
  }
  SPK_ASSIGN_OR_RETURN(config->file_prompts, bench::ReadPromptFile(fs, flags.prompts_path));
  config->ignore_eos = flags.prompts_ignore_eos;
  if (!flags.repeats_given) config->repeats = config->file_prompts.size();
  return Status::Ok();
}

Result<std::vector<size_t>> ParseLengths(const std::string& text) {
  std::vector<size_t> lengths;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v == 0) {
      return Status::Usage("--prompt-lengths: '" + item + "' is not a positive integer");
    }
    lengths.push_back(static_cast<size_t>(v));
  }
  return lengths;
}

}  // namespace

Status ApplyBenchFlags(FileSystem* fs, const BenchFlags& flags, bench::BenchConfig* config) {
  *config = flags;  // the options the rows set on the config itself
  if (flags.arm_specs.empty()) {
    return Status::Usage("give at least one --arm NAME=URL|cmd:COMMAND");
  }
  for (const std::string& text : flags.arm_specs) {
    SPK_ASSIGN_OR_RETURN(bench::ArmSpec arm, bench::ParseArmSpec(text));
    config->arms.push_back(std::move(arm));
  }
  if (!flags.prompts_path.empty()) {
    SPK_RETURN_IF_ERROR(ApplyPromptsFile(fs, flags, config));
  } else {
    SPK_ASSIGN_OR_RETURN(config->prompt_lengths, ParseLengths(flags.length_grid));
  }
  if (!flags.port_range.empty()) {
    int first = 0, last = 0;
    char dash = 0;
    std::istringstream in(flags.port_range);
    if (!(in >> first >> dash >> last) || dash != '-' || first < 1 || last > 65535 ||
        first > last) {
      return Status::Usage("--port-range: '" + flags.port_range +
                           "' is not FIRST-LAST (e.g. 18130-18139)");
    }
    config->port_first = first;
    config->port_last = last;
  }
  return Status::Ok();
}

Result<nlohmann::json> PoolResultsFiles(FileSystem* fs, const BenchFlags& flags) {
  std::vector<nlohmann::json> docs;
  for (const std::string& path : flags.report_files) {
    SPK_ASSIGN_OR_RETURN(std::string text, fs->ReadFile(path));
    nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return Status::InvalidInput(path + ": not valid JSON");
    docs.push_back(std::move(doc));
  }
  SPK_ASSIGN_OR_RETURN(nlohmann::json pooled, bench::PoolResults(docs, flags.report_files));
  if (!flags.report_json.empty()) {
    SPK_RETURN_IF_ERROR(WriteFileAtomically(fs, flags.report_json, pooled.dump(2) + "\n"));
  }
  return pooled;
}

Status WriteBenchFiles(FileSystem* fs, const nlohmann::json& results, const BenchFlags& flags) {
  if (!flags.json_path.empty())
    SPK_RETURN_IF_ERROR(WriteFileAtomically(fs, flags.json_path, results.dump(2) + "\n"));
  if (!flags.svg_path.empty())
    SPK_RETURN_IF_ERROR(WriteFileAtomically(fs, flags.svg_path, bench::RenderSvg(results)));
  return Status::Ok();
}

namespace {

using Row = OptionRow<BenchFlags>;

// In the order of the CLI's --help and of the Python bench()'s parameters.
constexpr Row kBenchRows[] = {
    {"--arm", "arms", ParamType::kStrList, "",
     "An arm: NAME=http://host:port (a running server) or 'NAME=cmd:COMMAND' (launched; {port} "
     "is replaced by a free port). Repeat; the first arm is the baseline.",
     &BenchFlags::arm_specs},
    {"--prompt-lengths", "prompt_lengths", ParamType::kOptionalStr, "None",
     "Prompt lengths in tokens, comma separated", &BenchFlags::length_grid,
     /*shows_default=*/true},
    {"--prompts", "prompts", ParamType::kOptionalPath, "None",
     "JSONL file of prompts to send instead of the built-in code corpus: each line "
     "{\"messages\": [...]} (chat completions) or {\"prompt\": \"...\"} (completions), "
     "optionally with \"max_tokens\"; cycled in order, block b sends prompt b mod N to every arm; "
     "generation ends at EOS",
     &BenchFlags::prompts_path},
    {"--ignore-eos", "ignore_eos", ParamType::kBool, "False",
     "With --prompts: generate exactly --max-tokens (or the line's max_tokens) tokens, ignoring "
     "EOS",
     &BenchFlags::prompts_ignore_eos},
    {"--repeats", "repeats", ParamType::kOptionalInt, "None",
     "Measured requests per arm and prompt length (ABBA blocks); with --prompts, default: the "
     "number of prompts",
     &BenchFlags::repeats, /*shows_default=*/true},
    {"--warmup", "warmup", ParamType::kInt, "3",
     "Warm-up requests per arm (and per launch), excluded from every figure", &BenchFlags::warmup},
    {"--max-tokens", "max_tokens", ParamType::kInt, "256",
     "Output length in tokens: fixed (ignore_eos); with --prompts the most a response may have, "
     "unless --ignore-eos",
     &BenchFlags::max_tokens},
    {"--chat", "chat", ParamType::kBool, "False",
     "Use /v1/chat/completions (thinking off) instead of /v1/completions", &BenchFlags::chat},
    {"--model", "model", ParamType::kOptionalStr, "None",
     "Model name to send (default: the first of /v1/models)", &BenchFlags::model},
    {"--json", "json_path", ParamType::kOptionalPath, "None",
     "Write every request and the analysis to this JSON file", &BenchFlags::json_path},
    {"--svg", "svg", ParamType::kOptionalPath, "None",
     "Write a plot of tok/s by prompt length per arm (SVG)", &BenchFlags::svg_path},
    {"--request-timeout", "request_timeout", ParamType::kFloat, "300.0",
     "Seconds without data before a request counts as failed", &BenchFlags::request_timeout_s},
    {"--launch-timeout", "launch_timeout", ParamType::kFloat, "1200.0",
     "Seconds to wait for a launched server's /health", &BenchFlags::launch_timeout_s},
    {"--stop-grace", "stop_grace", ParamType::kFloat, "15.0",
     "Seconds between SIGTERM and SIGKILL when stopping a server", &BenchFlags::stop_grace_s},
    {"--log-dir", "log_dir", ParamType::kPath, "\".\"", "Folder for launched servers' logs (kept)",
     &BenchFlags::log_dir},
    {"--port-range", "port_range", ParamType::kOptionalStr, "None",
     "Ports for launched servers' {port}, FIRST-LAST (default: any free port)",
     &BenchFlags::port_range},
    {"--start-reversed", "start_reversed", ParamType::kBool, "False",
     "Start the ABBA schedule with the last arm (alternate this between machines)",
     &BenchFlags::start_reversed},
    {"--noisy-mad", "noisy_mad", ParamType::kFloat, "0.05",
     "Flag cells whose relative MAD (MAD / median) exceeds this", &BenchFlags::noisy_relative_mad},
    {"--no-metrics", "metrics", ParamType::kBool, "True",
     "Do not read /metrics (no acceptance figures; metrics=False in Python)",
     &BenchFlags::scrape_metrics},
};

constexpr Row kBenchReportRows[] = {
    {"files", "files", ParamType::kPathList, "", "Results JSON files written by `bench --json`",
     &BenchFlags::report_files},
    {"--json", "json_path", ParamType::kOptionalPath, "None",
     "Write the pooled estimates to this JSON file", &BenchFlags::report_json},
};

}  // namespace

std::span<const OptionRow<BenchFlags>> BenchOptionRows() { return kBenchRows; }
std::span<const OptionRow<BenchFlags>> BenchReportOptionRows() { return kBenchReportRows; }

void AddBenchCommand(CLI::App& app, CommandBody* run) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* sub = app.add_subcommand(
      "bench",
      "Counterbalanced A/B decode benchmark of OpenAI-compatible servers (see docs/bench.md)");
  AddOptionRows(sub, BenchOptionRows(), flags.get());
  sub->get_option("--prompts")->type_name("FILE");

  CLI::App* report = sub->add_subcommand(
      "report", "Pool results files from several machines (inverse-variance weighted log ratios)");
  AddOptionRows(report, BenchReportOptionRows(), flags.get());
  // Checked while parsing, on the CLI only: Python's bench_report() raises FileNotFoundError.
  report->get_option("files")->check(CLI::ExistingFile);

  sub->callback([run, flags, report, sub] {
    flags->command_line = "sparkulator bench";
    flags->repeats_given = sub->count("--repeats") > 0;
    flags->prompt_lengths_given = sub->count("--prompt-lengths") > 0;
    if (report->parsed()) {
      *run = [flags] { return RunReport(FileSystem::Default(), *flags); };
    } else {
      *run = [flags] { return RunMain(FileSystem::Default(), *flags); };
    }
  });
}

}  // namespace spk::cli
