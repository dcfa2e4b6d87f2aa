#include "bench/memory.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "base/lines.h"

namespace spk::bench {
namespace {

using nlohmann::json;

constexpr std::string_view kModelLoading = "Model loading took ";
constexpr std::string_view kCheckpointSize = "Checkpoint size: ";
constexpr std::string_view kDrafter = "Loading drafter model";

// `lines` with every invalid UTF-8 byte replaced by U+FFFD: a log is bytes, and nlohmann-json
// throws when it dumps a string that is not UTF-8 (the fuzzer found a log line that ended bench).
json ValidUtf8Lines(const std::vector<std::string>& lines) {
  json out = json::array();
  for (const std::string& line : lines) {
    out.push_back(json::parse(json(line).dump(-1, ' ', false, json::error_handler_t::replace)));
  }
  return out;
}

// The number right after `marker` in `line` (e.g. "69.34" of "took 69.34 GiB").
std::optional<double> NumberAfter(std::string_view line, std::string_view marker) {
  size_t at = line.find(marker);
  if (at == std::string_view::npos) return std::nullopt;
  std::string rest(line.substr(at + marker.size(), 32));
  char* end = nullptr;
  double value = std::strtod(rest.c_str(), &end);
  if (end == rest.c_str()) return std::nullopt;
  return value;
}

// The bytes of a /proc file, "" when it cannot be read (the process is gone).
std::string ReadSmallFile(FileSystem* fs, const std::string& path) {
  Result<std::string> text = fs->ReadFile(path);
  return text.ok() ? *text : "";
}

// The value in kB of a "Key:   123 kB" line of /proc/PID/status or smaps_rollup, in bytes.
unsigned long long KilobytesField(const std::string& text, std::string_view key) {
  size_t at = text.find(std::string(key) + ":");
  if (at == std::string::npos) return 0;
  return std::strtoull(text.c_str() + at + key.size() + 1, nullptr, 10) * 1024;
}

// The process group and name of /proc/PID/stat ("pid (comm) state ppid pgrp ...").
bool ReadStat(FileSystem* fs, const std::string& pid, pid_t* pgrp, std::string* name) {
  std::string stat = ReadSmallFile(fs, "/proc/" + pid + "/stat");
  size_t open = stat.find('('), close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  *name = stat.substr(open + 1, close - open - 1);
  std::istringstream rest(stat.substr(close + 1));
  std::string state, ppid;
  long group = 0;
  if (!(rest >> state >> ppid >> group)) return false;
  *pgrp = static_cast<pid_t>(group);
  return true;
}

}  // namespace

json LogMemory::ToJson() const {
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  json j = {{"model_loading_gib", opt(model_loading_gib)},
            {"target_checkpoint_gib", opt(target_checkpoint_gib)},
            {"draft_checkpoint_gib", opt(draft_checkpoint_gib)},
            {"lines", ValidUtf8Lines(lines)}};
  if (!model_loading_gib) {
    j["model_loading_note"] =
        "no \"Model loading took\" line in the log (vLLM 0.32's GPU model runners write one; its "
        "CPU model runner does not)";
  }
  return j;
}

LogMemory ParseVllmLogMemory(std::string_view log) {
  LogMemory memory;
  bool after_drafter = false;
  for (std::string_view line : SplitLines(log)) {
    if (line.find(kDrafter) != std::string_view::npos) after_drafter = true;
    if (auto gib = NumberAfter(line, kModelLoading)) {
      memory.model_loading_gib = memory.model_loading_gib.value_or(0) + *gib;
      memory.lines.emplace_back(line);
    } else if (auto size = NumberAfter(line, kCheckpointSize)) {
      std::optional<double>& slot =
          after_drafter ? memory.draft_checkpoint_gib : memory.target_checkpoint_gib;
      if (!slot) {  // one line per model even when several workers log it
        slot = *size;
        memory.lines.emplace_back(line);
      }
    }
  }
  return memory;
}

std::optional<ProcessMemory> ProcessGroupMemory(FileSystem* fs, pid_t pgid) {
  Result<std::vector<std::string>> entries = fs->ListDirectory("/proc");
  if (!entries.ok()) return std::nullopt;
  std::vector<std::string> pids;
  for (const std::string& entry : *entries) {
    if (!entry.empty() && entry.find_first_not_of("0123456789") == std::string::npos) {
      pids.push_back(entry);
    }
  }
  // In pid order, as /proc lists them (ListDirectory sorts bytewise: "10" before "9").
  std::stable_sort(pids.begin(), pids.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  ProcessMemory memory;
  for (const std::string& pid : pids) {
    pid_t group = 0;
    std::string name;
    if (!ReadStat(fs, pid, &group, &name) || group != pgid) continue;
    unsigned long long rss = KilobytesField(ReadSmallFile(fs, "/proc/" + pid + "/status"), "VmRSS");
    unsigned long long pss =
        KilobytesField(ReadSmallFile(fs, "/proc/" + pid + "/smaps_rollup"), "Pss");
    memory.rss_bytes += rss;
    memory.pss_bytes += pss;
    memory.processes.push_back(
        {{"pid", std::atoi(pid.c_str())}, {"name", name}, {"rss_bytes", rss}, {"pss_bytes", pss}});
  }
  if (memory.processes.empty()) return std::nullopt;
  return memory;
}

void PeakMemory::Add(const ProcessMemory& sample) {
  ++samples_;
  if (!peak_ || sample.rss_bytes > peak_->rss_bytes) peak_ = sample;
}

json PeakMemory::ToJson() const {
  if (!peak_) return nullptr;
  return {{"peak_rss_bytes", peak_->rss_bytes},
          {"peak_pss_bytes", peak_->pss_bytes},
          {"processes", peak_->processes},
          {"samples", samples_},
          {"source",
           "/proc VmRSS and smaps_rollup Pss summed over the server's process group, sampled "
           "after every warm-up and every turn; the sample with the largest RSS"}};
}

json MetricsMemory(const std::vector<http::MetricSample>& samples) {
  json j = json::object();
  for (const http::MetricSample& s : samples) {
    if (s.name == "process_resident_memory_bytes" || s.name == "process_virtual_memory_bytes") {
      j[s.name] = j.value(s.name, 0.0) + s.value;
    }
  }
  if (j.empty()) return nullptr;
  j["source"] =
      "/metrics process_* gauges: the process that serves /metrics only (vLLM's API server, not "
      "its engine core or workers)";
  return j;
}

}  // namespace spk::bench
