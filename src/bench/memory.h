// Memory per arm: what the server says it spent on model weights, and what its processes hold.
//
// Three sources, each reported as what it is:
//   - vLLM's log (launched arms). vLLM 0.32's GPU model runners log, once per worker, after loading
//     the target AND the drafter inside one memory profiler (v1/worker/gpu_model_runner.py,
//     v1/worker/gpu/model_runner.py):
//         "Model loading took 69.34 GiB memory and 12.345678 seconds"
//     so that figure is target + draft together. Its CPU runner (v1/worker/cpu_model_runner.py)
//     logs no such line. Every build logs, once per weights load (model_loader/weight_utils.py):
//         "Filesystem type for checkpoints: EXT4. Checkpoint size: 0.50 GiB. Available RAM: ..."
//     the target's first, and the drafter's after "Loading drafter model...": target and draft
//     separately (the size of the safetensors files, with two decimals).
//   - /proc (launched arms): resident memory (VmRSS) and proportional set size (Pss, which counts a
//     shared page once across processes) summed over the server's process group (API server,
//     engine core, workers).
//   - /metrics (URL arms): `process_resident_memory_bytes` of prometheus_client, which covers the
//     process that serves /metrics only (vLLM's API server, not its engine or workers).
// /proc is listed and read through the FileSystem ProcessGroupMemory is handed (its whole-file
// reads go to the end, so /proc files, which stat says are empty, read whole).
// Ownership: values. Thread safety: reentrant. Error policy: no exceptions; a source that is not
// there is an absent field with a note, never an error.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/file.h"

#include "http/prometheus.h"

namespace spk::bench {

struct LogMemory {
  std::optional<double> model_loading_gib;      // sum over workers of "Model loading took"
  std::optional<double> target_checkpoint_gib;  // "Checkpoint size" before the drafter line
  std::optional<double> draft_checkpoint_gib;   // "Checkpoint size" after "Loading drafter model"
  std::vector<std::string> lines;               // the exact lines read, for the report

  nlohmann::json ToJson() const;
};

// Reads the lines above from a vLLM log.
LogMemory ParseVllmLogMemory(std::string_view log);

struct ProcessMemory {
  unsigned long long rss_bytes = 0;
  unsigned long long pss_bytes = 0;                    // 0 when smaps_rollup is not readable
  nlohmann::json processes = nlohmann::json::array();  // {pid, name, rss_bytes, pss_bytes}
};

// The memory of every process in process group `pgid`, in pid order; nullopt when none is found
// (or /proc cannot be listed). A process whose files cannot be read counts as 0 bytes.
std::optional<ProcessMemory> ProcessGroupMemory(FileSystem* fs, pid_t pgid);

// Keeps the sample with the largest RSS of a launched arm's samples.
class PeakMemory {
 public:
  void Add(const ProcessMemory& sample);
  nlohmann::json ToJson() const;  // null before the first sample

 private:
  std::optional<ProcessMemory> peak_;
  size_t samples_ = 0;
};

// process_resident_memory_bytes and process_virtual_memory_bytes of a /metrics page; null when
// it has neither.
nlohmann::json MetricsMemory(const std::vector<http::MetricSample>& samples);

}  // namespace spk::bench
