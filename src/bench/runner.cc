#include "bench/runner.h"

#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <optional>
#include <sstream>

#include "base/version.h"
#include "bench/memory.h"
#include "bench/report.h"
#include "bench/request.h"
#include "bench/schedule.h"
#include "bench/workload.h"

namespace spk::bench {
namespace {

using nlohmann::json;

struct ArmState {
  ArmSpec spec;
  http::Url url;
  std::unique_ptr<LaunchedServer> server;
  std::vector<std::string> logs;
  std::string model;
  json server_info = json::object();
  bool warmed = false;
  PeakMemory process_memory;      // launched arms
  json metrics_memory = nullptr;  // URL arms: what /metrics offers
};

// The value after the ':' of the first line of `path` that starts with `prefix`; "" when there is
// none or the file cannot be read.
std::string FirstLineOf(FileSystem* fs, const std::string& path, const std::string& prefix) {
  Result<std::string> text = fs->ReadFile(path);
  if (!text.ok()) return "";
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) {
      size_t colon = line.find(':');
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      return value;
    }
  }
  return "";
}

json HostInfo(FileSystem* fs) {
  json host;
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  host["hostname"] = name;
  utsname u{};
  if (::uname(&u) == 0) host["os"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
  host["cpu"] = FirstLineOf(fs, "/proc/cpuinfo", "model name");
  host["cpus"] = ::sysconf(_SC_NPROCESSORS_ONLN);
  json gpus = json::array();
  const std::string gpu_dir = "/proc/driver/nvidia/gpus";
  if (auto entries = fs->ListDirectory(gpu_dir); entries.ok()) {  // none without NVIDIA's driver
    for (const std::string& entry : *entries) {
      gpus.push_back(FirstLineOf(fs, gpu_dir + "/" + entry + "/information", "Model"));
    }
  }
  host["gpus"] = gpus;
  return host;
}

json BuildInfo() {
  return {
    {"version", kSparkulatorVersion},
#if defined(__clang__)
        {"compiler", "clang " __clang_version__},
#elif defined(__GNUC__)
        {"compiler", "gcc " __VERSION__},
#endif
    {
      "built", __DATE__ " " __TIME__
    }
  };
}

json FlagsJson(const BenchConfig& c) {
  json arms = json::array();
  for (const ArmSpec& a : c.arms) {
    arms.push_back({{"name", a.name}, {"url", a.url}, {"command", a.command}});
  }
  return {{"arms", arms},
          {"prompt_lengths", c.prompt_lengths},
          {"repeats", c.repeats},
          {"warmup", c.warmup},
          {"max_tokens", c.max_tokens},
          {"chat", c.chat},
          {"prompts_file", c.file_prompts.empty() ? json(nullptr) : json(c.prompts_path)},
          {"ignore_eos", c.ignore_eos},
          {"model", c.model},
          {"concurrency", 1},
          {"request_timeout_s", c.request_timeout_s},
          {"start_reversed", c.start_reversed},
          {"noisy_relative_mad", c.noisy_relative_mad}};
}

std::string NowIso() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

json GetJsonOrNull(const http::Url& url, const char* path) {
  http::RequestOptions options;
  options.idle_timeout = std::chrono::milliseconds(10000);
  auto response = http::Get(url, path, options);
  if (!response.ok() || response->status != 200) return nullptr;
  json j = json::parse(response->body, nullptr, false);
  return j.is_discarded() ? json(nullptr) : j;
}

class Run {
 public:
  Run(FileSystem* fs, const BenchConfig& config, const std::atomic<bool>* cancel,
      const ProgressFn& progress)
      : fs_(fs),
        config_(config),
        cancel_(cancel),
        progress_(progress),
        start_(std::chrono::steady_clock::now()) {
    for (const ArmSpec& spec : config.arms) {
      ArmState state;
      state.spec = spec;
      arms_.push_back(std::move(state));
    }
    doc_ = {{"tool", "sparkulator bench"},
            {"started_at", NowIso()},
            {"command_line", config.command_line},
            {"flags", FlagsJson(config)},
            {"build", BuildInfo()},
            {"host", HostInfo(fs)}};
  }

  Status Execute() {
    SPK_RETURN_IF_ERROR(CheckUrlArms());
    std::vector<Turn> turns = AbbaSchedule(arms_.size(), config_.repeats, config_.start_reversed);
    std::optional<size_t> up;  // the launched arm currently running
    for (const Turn& turn : turns) {
      if (Cancelled()) return Status::Cancelled("interrupted");
      ArmState& arm = arms_[turn.arm];
      if (arm.spec.launched() && up != turn.arm) {
        if (up) StopServer(arms_[*up]);
        up.reset();
        SPK_RETURN_IF_ERROR(LaunchServer(arm));
        up = turn.arm;
      }
      SPK_RETURN_IF_ERROR(Prepare(arm));
      if (!arm.warmed) {
        SPK_RETURN_IF_ERROR(WarmUp(turn.arm));
        arm.warmed = true;
        SampleMemory(arm);
      }
      for (size_t length : Cells()) {
        RequestRecord record;
        record.block = turn.block;
        record.prompt_length = length;
        // The file's prompts in order, cycled: every arm sends prompt b in block b.
        record.variant = turn.block % (config_.file_prompts.empty() ? config_.repeats
                                                                    : config_.file_prompts.size());
        SPK_RETURN_IF_ERROR(Measure(turn.arm, &record));
        std::string which =
            config_.file_prompts.empty()
                ? std::to_string(length)
                : "line " + std::to_string(config_.file_prompts[record.variant].line);
        progress_(fmt::format("[{}] block {}/{} prompt {}: {}", arm.spec.name, turn.block + 1,
                              config_.repeats, which,
                              record.ok ? fmt::format("{:.1f} tok/s", record.decode_tok_s)
                                        : "FAILED: " + record.error));
        if (arm.server && !arm.server->Running()) {
          return Status::Unavailable(fmt::format(
              "arm {}: the server {} during the run. Its log ({}) ends with:\n{}", arm.spec.name,
              arm.server->ExitDescription(), arm.server->log_path(), arm.server->LogTail()));
        }
      }
      SampleMemory(arm);
    }
    return Status::Ok();
  }

  json Finish(bool interrupted) {
    for (ArmState& arm : arms_) StopServer(arm);
    AnalysisOptions options;
    for (const ArmState& arm : arms_) options.arm_names.push_back(arm.spec.name);
    options.prompt_lengths = Cells();
    options.noisy_relative_mad = config_.noisy_relative_mad;
    json analysis = Analyze(records_, options);
    for (size_t a = 0; a < arms_.size(); ++a) {
      json& arm = analysis["arms"][a];
      arm["url"] = arms_[a].spec.launched() ? json(nullptr) : json(arms_[a].spec.url);
      arm["command"] = arms_[a].spec.command;
      arm["logs"] = arms_[a].logs;
      arm["model"] = arms_[a].model;
      arm["server"] = arms_[a].server_info;
      arm["memory"] = MemoryJson(arms_[a]);
    }
    doc_["arms"] = analysis["arms"];
    doc_["comparisons"] = analysis["comparisons"];
    doc_["model"] = arms_.empty() ? "" : arms_[0].model;
    doc_["server"] = arms_.empty() ? json(nullptr) : arms_[0].server_info;
    doc_["prompts"] = !config_.file_prompts.empty() ? FilePromptsJson()
                      : prompts_                    ? prompts_->ToJson()
                                                    : json(nullptr);
    doc_["interrupted"] = interrupted;
    doc_["finished_at"] = NowIso();
    json requests = json::array();
    for (const RequestRecord& r : records_) requests.push_back(r.ToJson());
    doc_["requests"] = requests;
    return doc_;
  }

 private:
  bool Cancelled() const { return cancel_ != nullptr && cancel_->load(); }

  // The cells every arm's turn runs once: the prompt lengths, or the one cell of a prompts file.
  std::vector<size_t> Cells() const {
    if (config_.file_prompts.empty()) return config_.prompt_lengths;
    return {kPromptFileCell};
  }

  json FilePromptsJson() const {
    size_t chat = 0;
    for (const FilePrompt& p : config_.file_prompts) chat += p.chat ? 1 : 0;
    size_t n = config_.file_prompts.size();
    return {{"method", "file"},
            {"exact", nullptr},
            {"file", config_.prompts_path},
            {"count", n},
            {"chat", chat},
            {"text", n - chat},
            {"ignore_eos", config_.ignore_eos},
            {"description",
             fmt::format("{} prompts from {} ({} chat, {} text), in file order, cycled over the "
                         "blocks; generation {}",
                         n, config_.prompts_path, chat, n - chat,
                         config_.ignore_eos ? "ignores EOS (--ignore-eos)" : "ends at EOS")},
            {"degraded", json::array()},
            {"largest_length_error_tokens", nullptr}};
  }

  // A launched arm: its process group's memory now. A URL arm: /metrics' process gauges.
  void SampleMemory(ArmState& arm) {
    if (arm.server) {
      if (auto sample = ProcessGroupMemory(fs_, arm.server->process_group())) {
        arm.process_memory.Add(*sample);
      }
      return;
    }
    if (!config_.scrape_metrics) return;
    http::RequestOptions options;
    options.idle_timeout = std::chrono::milliseconds(10000);
    auto response = http::Get(arm.url, "/metrics", options);
    if (!response.ok() || response->status != 200) return;
    auto samples = http::ParsePrometheusText(response->body);
    if (samples.ok()) arm.metrics_memory = MetricsMemory(*samples);
  }

  // The memory figures of one arm, each source as what it is (bench/memory.h).
  json MemoryJson(const ArmState& arm) const {
    if (!arm.spec.launched()) {
      json j = {{"kind", "url"}, {"metrics", arm.metrics_memory}};
      if (arm.metrics_memory.is_null()) {
        j["note"] = "not available: /metrics has no process_resident_memory_bytes";
      }
      return j;
    }
    json j = {{"kind", "launched"}, {"process", arm.process_memory.ToJson()}};
    j["vllm_log"] =
        arm.logs.empty() ? json(nullptr) : ParseVllmLogMemory(ReadLog(arm.logs.back())).ToJson();
    return j;
  }

  // A server's log; "" when it cannot be read (its memory figures are then absent, with a note).
  std::string ReadLog(const std::string& path) const {
    Result<std::string> text = fs_->ReadFile(path);
    return text.ok() ? *text : "";
  }

  Status CheckUrlArms() {
    for (ArmState& arm : arms_) {
      if (arm.spec.launched()) continue;
      SPK_ASSIGN_OR_RETURN(arm.url, http::ParseUrl(arm.spec.url));
      http::RequestOptions options;
      options.connect_timeout = std::chrono::milliseconds(3000);
      options.idle_timeout = std::chrono::milliseconds(10000);
      options.cancel = cancel_;
      auto response = http::Get(arm.url, "/v1/models", options);
      if (!response.ok()) return response.status().WithContext("arm " + arm.spec.name);
      if (response->status != 200) {
        return Status::Unavailable(
            fmt::format("arm {}: GET {}/v1/models answered HTTP {}; is this an "
                        "OpenAI-compatible server?",
                        arm.spec.name, arm.url.ToString(), response->status));
      }
    }
    return Status::Ok();
  }

  Status LaunchServer(ArmState& arm) {
    SPK_ASSIGN_OR_RETURN(int port, FindFreePort(config_.port_first, config_.port_last));
    // A folder that cannot be made fails at the log's creation, naming the log.
    (void)fs_->CreateDirectories(config_.log_dir);
    std::string log = JoinPath(config_.log_dir,
                               fmt::format("bench-{}-{}.log", arm.spec.name, arm.logs.size() + 1));
    arm.logs.push_back(log);
    arm.server = std::make_unique<LaunchedServer>(fs_);
    progress_(fmt::format("[{}] launching on port {} (log {})", arm.spec.name, port, log));
    SPK_RETURN_IF_ERROR(
        arm.server->Start(arm.spec.command, port, log).WithContext("arm " + arm.spec.name));
    arm.url = http::Url{"127.0.0.1", port, ""};
    SPK_RETURN_IF_ERROR(
        arm.server
            ->WaitHealthy(
                arm.url, std::chrono::seconds(static_cast<long>(config_.launch_timeout_s)), cancel_)
            .WithContext("arm " + arm.spec.name));
    arm.warmed = false;  // a fresh server is cold again
    return Status::Ok();
  }

  void StopServer(ArmState& arm) {
    if (!arm.server) return;
    arm.server->Stop(std::chrono::milliseconds(static_cast<long>(config_.stop_grace_s * 1000)));
    arm.server.reset();
  }

  // Model name, server info and (once) the prompts.
  Status Prepare(ArmState& arm) {
    if (arm.model.empty()) {
      arm.model = config_.model;
      json models = GetJsonOrNull(arm.url, "/v1/models");
      arm.server_info["models"] = models;
      arm.server_info["version"] = GetJsonOrNull(arm.url, "/version");
      if (arm.model.empty() && models.is_object() && models.contains("data") &&
          models["data"].is_array() && !models["data"].empty() &&
          models["data"][0].contains("id")) {
        arm.model = models["data"][0]["id"].get<std::string>();
      }
    }
    if (!prompts_ && config_.file_prompts.empty()) {
      http::RequestOptions options;
      options.idle_timeout =
          std::chrono::milliseconds(static_cast<long>(config_.request_timeout_s * 1000));
      options.cancel = cancel_;
      PromptRequest request{arm.model, config_.chat, config_.prompt_lengths, config_.repeats + 1};
      SPK_ASSIGN_OR_RETURN(PromptSet set, BuildPrompts(arm.url, BuiltinCorpus(), request, options));
      for (const std::string& what : set.degraded) progress_("degraded: " + what);
      progress_("prompts: " + set.description);
      prompts_ = std::move(set);
    }
    return Status::Ok();
  }

  Status WarmUp(size_t arm_index) {
    for (size_t i = 0; i < config_.warmup; ++i) {
      RequestRecord record;
      record.warmup = true;
      std::vector<size_t> cells = Cells();
      record.prompt_length = cells[i % cells.size()];
      // Built-in corpus: a prompt no measured request uses. A file: its prompts from the start.
      record.variant =
          config_.file_prompts.empty() ? config_.repeats : i % config_.file_prompts.size();
      SPK_RETURN_IF_ERROR(Measure(arm_index, &record));
      progress_(fmt::format("[{}] warm-up {}/{}: {}", arms_[arm_index].spec.name, i + 1,
                            config_.warmup, record.ok ? "ok" : "FAILED: " + record.error));
    }
    return Status::Ok();
  }

  Status Measure(size_t arm_index, RequestRecord* record) {
    ArmState& arm = arms_[arm_index];
    record->arm = arm.spec.name;
    record->arm_index = arm_index;
    RequestSettings settings;
    settings.model = arm.model;
    settings.chat = config_.chat;
    settings.max_tokens = config_.max_tokens;
    settings.ignore_eos = config_.ignore_eos;
    settings.timeout =
        std::chrono::milliseconds(static_cast<long>(config_.request_timeout_s * 1000));
    settings.scrape_metrics = config_.scrape_metrics;
    settings.cancel = cancel_;
    json prompt;
    if (config_.file_prompts.empty()) {
      prompt = prompts_->prompts.at(record->prompt_length).at(record->variant);
    } else {
      const FilePrompt& file = config_.file_prompts.at(record->variant);
      prompt = file.input;
      settings.chat = file.chat;
      settings.max_tokens = file.max_tokens.value_or(config_.max_tokens);
    }
    Status status = MeasureRequest(arm.url, prompt, settings, start_, record);
    if (!status.ok()) return status;
    records_.push_back(*record);
    return Status::Ok();
  }

  FileSystem* fs_;
  const BenchConfig& config_;
  const std::atomic<bool>* cancel_;
  const ProgressFn& progress_;
  std::chrono::steady_clock::time_point start_;
  std::vector<ArmState> arms_;
  std::optional<PromptSet> prompts_;
  std::vector<RequestRecord> records_;
  json doc_;
};

}  // namespace

Result<json> RunBench(const RunContext& context, const BenchConfig& config,
                      const ProgressFn& progress, json* partial) {
  if (config.arms.empty()) return Status::Usage("give at least one --arm");
  if (config.file_prompts.empty() && config.prompt_lengths.empty())
    return Status::Usage("--prompt-lengths is empty");
  if (config.repeats == 0) return Status::Usage("--repeats must be at least 1");
  for (size_t i = 0; i < config.arms.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (config.arms[i].name == config.arms[j].name) {
        return Status::Usage("two arms are named '" + config.arms[i].name + "'; names must differ");
      }
    }
  }
  Run run(context.fs, config, context.cancel, progress);
  Status status = run.Execute();
  json doc = run.Finish(status.code() == StatusCode::kCancelled);
  if (status.ok()) return doc;
  if (partial != nullptr) *partial = std::move(doc);
  return status;
}

}  // namespace spk::bench
