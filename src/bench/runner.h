// The benchmark run: brings each arm up (or reaches it), cuts the prompts, warms every arm up, runs
// the ABBA schedule, and returns every request with the analysis (see report.h) as one JSON
// document.
//
// Launched arms are started before their turn and stopped (SIGTERM, then SIGKILL after a grace
// period) before the next arm starts; consecutive turns of the same arm (the BB of ABBA) share one
// launch, and every launch is warmed up again. When `cancel` becomes true the run stops at once,
// stops its servers and returns what it has, marked "interrupted". Ownership: the caller owns
// config, the cancel flag and the FileSystem, which must outlive the call; every file the run
// touches (the log folder, the servers' logs, /proc) goes through that FileSystem, except the
// descriptor a launched server writes its log to (bench/arm.h). Thread safety: one run per thread.
// Error policy: no exceptions; a Status for a run that could not start or whose arm became unusable
// (the partial results are still returned in *partial when it is not null).
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/arm.h"
#include "bench/prompt_file.h"
#include "io/file.h"
#include "io/run_context.h"

namespace spk::bench {

struct BenchConfig {
  std::vector<ArmSpec> arms;
  std::vector<size_t> prompt_lengths{512, 2048, 8192};
  size_t repeats = 12;
  size_t warmup = 3;
  size_t max_tokens = 256;
  bool chat = false;
  // --prompts: the file's prompts replace the built-in corpus and prompt_lengths (one cell, key
  // kPromptFileCell); block b sends prompt b mod size, the same to every arm.
  std::vector<FilePrompt> file_prompts;
  std::string prompts_path;
  bool ignore_eos = true;  // false: generation ends at EOS (the default with --prompts)
  std::string model;       // empty: the first id in /v1/models
  double request_timeout_s = 300;
  double launch_timeout_s = 1200;
  double stop_grace_s = 15;
  std::string log_dir = ".";
  int port_first = 0, port_last = 0;  // launched servers' ports; 0: any free port
  bool start_reversed = false;
  double noisy_relative_mad = 0.05;
  bool scrape_metrics = true;
  std::string command_line;  // recorded in the JSON
};

// The one cell of a run with --prompts (0 is never a prompt length).
inline constexpr size_t kPromptFileCell = 0;

using ProgressFn = std::function<void(const std::string& line)>;

// Runs the benchmark (cancelled by run.cancel between requests; its progress is lines, to
// `progress`, not run.progress's byte counts). On success returns the results document. On
// failure returns the Status and, when `partial` is not null, stores the results gathered so far
// there.
Result<nlohmann::json> RunBench(const RunContext& run, const BenchConfig& config,
                                const ProgressFn& progress, nlohmann::json* partial);

}  // namespace spk::bench
