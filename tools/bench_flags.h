// `bench`'s options, one option row each (tools/option_table.h: the CLI flag and the Python
// parameter), made into a bench::BenchConfig, and its results files written: shared by
// `sparkulator bench` (tools/bench_cmd.cc) and the Python bench() and bench_report()
// (python/src/api_bench.cc), so both take the same options, read an arm, the length grid, a prompts
// file and a port range the same way and write the same files.
//
// Errors: Status; Usage for a flag that does not parse or flags that contradict each other, with
// the flag's name. Nothing is printed.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/runner.h"
#include "io/file.h"
#include "option_table.h"

namespace spk::cli {

// The options as given. The rows of the options the benchmark takes as they are (--repeats,
// --warmup, ... --no-metrics) set the BenchConfig fields, whose initial values are the CLI's
// defaults; the fields below are what ApplyBenchFlags parses into the config, or the files.
struct BenchFlags : bench::BenchConfig {
  std::vector<std::string> arm_specs;         // --arm, parsed into arms
  std::string length_grid = "512,2048,8192";  // --prompt-lengths, parsed into prompt_lengths
  bool prompts_ignore_eos = false;            // --ignore-eos: ignore_eos with --prompts
  std::string json_path, svg_path;
  std::vector<std::string> report_files;
  std::string report_json;
  std::string port_range;
  // Given on the command line (not defaults): --prompts sets the repeats and refuses the others.
  bool repeats_given = false, prompt_lengths_given = false;
};

// bench's rows, and bench report's (FILES, --json).
std::span<const OptionRow<BenchFlags>> BenchOptionRows();
std::span<const OptionRow<BenchFlags>> BenchReportOptionRows();

// The arms, the prompts (--prompts FILE, read and checked whole, or the length grid) and the port
// range into `config` (the rest of flags' BenchConfig copied first), before any server is reached.
Status ApplyBenchFlags(FileSystem* fs, const BenchFlags& flags, bench::BenchConfig* config);

// The results as --json FILE and --svg FILE ask (each written atomically; none when not asked).
Status WriteBenchFiles(FileSystem* fs, const nlohmann::json& results, const BenchFlags& flags);

// `bench report`: the results files (report_files) read and pooled (bench::PoolResults), written to
// report_json when it is set; InvalidInput for a file that is not JSON.
Result<nlohmann::json> PoolResultsFiles(FileSystem* fs, const BenchFlags& flags);

}  // namespace spk::cli
