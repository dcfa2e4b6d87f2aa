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

int RunMain(FileSystem* fs, bench::BenchConfig config, const BenchFlags& flags) {
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
  config->prompts_path = flags.prompts_path;
  config->ignore_eos = flags.ignore_eos;
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
  if (flags.arms.empty()) return Status::Usage("give at least one --arm NAME=URL|cmd:COMMAND");
  for (const std::string& text : flags.arms) {
    SPK_ASSIGN_OR_RETURN(bench::ArmSpec arm, bench::ParseArmSpec(text));
    config->arms.push_back(std::move(arm));
  }
  if (!flags.prompts_path.empty()) {
    SPK_RETURN_IF_ERROR(ApplyPromptsFile(fs, flags, config));
  } else {
    SPK_ASSIGN_OR_RETURN(config->prompt_lengths, ParseLengths(flags.prompt_lengths));
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

void AddBenchCommand(CLI::App& app, CommandBody* run) {
  auto config = std::make_shared<bench::BenchConfig>();
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* sub = app.add_subcommand(
      "bench",
      "Counterbalanced A/B decode benchmark of OpenAI-compatible servers (see docs/bench.md)");
  sub->add_option(
      "--arm", flags->arms,
      "An arm: NAME=http://host:port (a running server) or 'NAME=cmd:COMMAND' (launched; "
      "{port} is replaced by a free port). Repeat; the first arm is the baseline.");
  sub->add_option("--prompt-lengths", flags->prompt_lengths,
                  "Prompt lengths in tokens, comma separated")
      ->capture_default_str();
  sub->add_option("--prompts", flags->prompts_path,
                  "JSONL file of prompts to send instead of the built-in code corpus: each line "
                  "{\"messages\": [...]} (chat completions) or {\"prompt\": \"...\"} "
                  "(completions), optionally with \"max_tokens\"; cycled in order, block b sends "
                  "prompt b mod N to every arm; generation ends at EOS")
      ->type_name("FILE");
  sub->add_flag("--ignore-eos", flags->ignore_eos,
                "With --prompts: generate exactly --max-tokens (or the line's max_tokens) tokens, "
                "ignoring EOS");
  sub->add_option("--repeats", config->repeats,
                  "Measured requests per arm and prompt length (ABBA blocks); with --prompts, "
                  "default: the number of prompts")
      ->capture_default_str();
  sub->add_option("--warmup", config->warmup,
                  "Warm-up requests per arm (and per launch), excluded from every figure")
      ->capture_default_str();
  sub->add_option("--max-tokens", config->max_tokens,
                  "Output length in tokens: fixed (ignore_eos); with --prompts the most a response "
                  "may have, unless --ignore-eos")
      ->capture_default_str();
  sub->add_flag("--chat", config->chat,
                "Use /v1/chat/completions (thinking off) instead of /v1/completions");
  sub->add_option("--model", config->model,
                  "Model name to send (default: the first of /v1/models)");
  sub->add_option("--json", flags->json_path,
                  "Write every request and the analysis to this JSON file");
  sub->add_option("--svg", flags->svg_path, "Write a plot of tok/s by prompt length per arm (SVG)");
  sub->add_option("--request-timeout", config->request_timeout_s,
                  "Seconds without data before a request counts as failed")
      ->capture_default_str();
  sub->add_option("--launch-timeout", config->launch_timeout_s,
                  "Seconds to wait for a launched server's /health")
      ->capture_default_str();
  sub->add_option("--stop-grace", config->stop_grace_s,
                  "Seconds between SIGTERM and SIGKILL when stopping a server")
      ->capture_default_str();
  sub->add_option("--log-dir", config->log_dir, "Folder for launched servers' logs (kept)")
      ->capture_default_str();
  sub->add_option("--port-range", flags->port_range,
                  "Ports for launched servers' {port}, FIRST-LAST (default: any free port)");
  sub->add_flag("--start-reversed", config->start_reversed,
                "Start the ABBA schedule with the last arm (alternate this between machines)");
  sub->add_option("--noisy-mad", config->noisy_relative_mad,
                  "Flag cells whose relative MAD (MAD / median) exceeds this")
      ->capture_default_str();
  sub->add_flag("!--no-metrics", config->scrape_metrics,
                "Do not read /metrics (no acceptance figures)");

  CLI::App* report = sub->add_subcommand(
      "report", "Pool results files from several machines (inverse-variance weighted log ratios)");
  report->add_option("files", flags->report_files, "Results JSON files written by `bench --json`")
      ->required()
      ->check(CLI::ExistingFile);
  report->add_option("--json", flags->report_json, "Write the pooled estimates to this JSON file");

  sub->callback([run, config, flags, report, sub] {
    std::string command_line = "sparkulator bench";
    config->command_line = command_line;
    flags->repeats_given = sub->count("--repeats") > 0;
    flags->prompt_lengths_given = sub->count("--prompt-lengths") > 0;
    if (report->parsed()) {
      *run = [flags] { return RunReport(FileSystem::Default(), *flags); };
    } else {
      *run = [config, flags] { return RunMain(FileSystem::Default(), *config, *flags); };
    }
  });
}

}  // namespace spk::cli
