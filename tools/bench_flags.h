// `bench`'s flags made into a bench::BenchConfig, and its results files written: shared by
// `sparkulator bench` (tools/bench_cmd.cc) and the Python bench() (python/src/api.cc), so both read
// an arm, the length grid, a prompts file and a port range the same way and write the same files.
//
// Errors: Status; Usage for a flag that does not parse or flags that contradict each other, with
// the flag's name. Nothing is printed.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/runner.h"
#include "io/file.h"

namespace spk::cli {

struct BenchFlags {
  std::vector<std::string> arms;
  std::string prompt_lengths = "512,2048,8192";
  std::string json_path, svg_path;
  std::vector<std::string> report_files;
  std::string report_json;
  std::string port_range;
  std::string prompts_path;
  bool ignore_eos = false;
  // Given on the command line (not defaults): --prompts sets the repeats and refuses the others.
  bool repeats_given = false, prompt_lengths_given = false;
};

// The arms, the prompts (--prompts FILE, read and checked whole, or the length grid) and the port
// range into `config`, before any server is reached.
Status ApplyBenchFlags(FileSystem* fs, const BenchFlags& flags, bench::BenchConfig* config);

// The results as --json FILE and --svg FILE ask (each written atomically; none when not asked).
Status WriteBenchFiles(FileSystem* fs, const nlohmann::json& results, const BenchFlags& flags);

// `bench report`: the results files (report_files) read and pooled (bench::PoolResults), written to
// report_json when it is set; InvalidInput for a file that is not JSON.
Result<nlohmann::json> PoolResultsFiles(FileSystem* fs, const BenchFlags& flags);

}  // namespace spk::cli
