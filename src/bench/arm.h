// Arms of a comparison: a server that is already running (a URL), or a command that launches one.
//
// `--arm NAME=http://host:port` or `--arm 'NAME=cmd:vllm serve M --port {port} ...'`. A command is
// split into argv like a POSIX shell would split words (quotes and backslashes), but NO shell runs
// it: no globbing, no variables, no pipes. `{port}` is replaced by a free local port.
//
// LaunchedServer owns one child process group: the server runs in its own process group (so
// stopping it reaches its workers too), with a fresh VLLM_CACHE_ROOT temp dir, stdout and stderr
// going to a kept log file; PR_SET_PDEATHSIG makes the kernel stop it if sparkulator itself dies.
// Stop() sends SIGTERM to the group, then SIGKILL after the grace period; the destructor calls
// Stop(). The log is read (LogTail) and the cache dir removed through the FileSystem it is given,
// which must outlive it; the log itself is opened with open(2), since the child's stdout and
// stderr need a descriptor, which a FileSystem's files do not expose. Thread safety: a
// LaunchedServer is used from one thread. Error policy: no exceptions; Status (a log that cannot
// be read is said in the tail, "(cannot read the log: ...)").
#pragma once

#include <sys/types.h>
#include <atomic>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "http/http_client.h"
#include "io/file.h"

namespace spk::bench {

struct ArmSpec {
  std::string name;
  std::string url;                   // set for a running server
  std::vector<std::string> command;  // set for a launched server; may contain "{port}"
  bool launched() const { return !command.empty(); }
};

// Parses "NAME=URL" or "NAME=cmd:COMMAND LINE".
Result<ArmSpec> ParseArmSpec(std::string_view text);

// Splits a command line into words: whitespace separates, '...' is literal, "..." allows \" \\ \$
// \`, a backslash outside quotes escapes the next character.
Result<std::vector<std::string>> SplitCommandLine(std::string_view line);

// A free TCP port on 127.0.0.1 (bound and released; another process could take it, rarely): any
// when `first` is 0, else the first free one in [first, last].
Result<int> FindFreePort(int first = 0, int last = 0);

class LaunchedServer {
 public:
  explicit LaunchedServer(FileSystem* fs) : fs_(fs) {}
  ~LaunchedServer();
  LaunchedServer(const LaunchedServer&) = delete;
  LaunchedServer& operator=(const LaunchedServer&) = delete;

  // Starts argv (with {port} replaced) writing its output to log_path. Returns once the process
  // runs.
  Status Start(std::vector<std::string> argv, int port, const std::string& log_path);

  // Polls GET /health (then /v1/models) until a 200 answer. Fails early with the log tail when the
  // process exits, on timeout, or when `cancel` becomes true.
  Status WaitHealthy(const http::Url& url, std::chrono::seconds timeout,
                     const std::atomic<bool>* cancel);

  // True while the child has not exited. Reaps it when it has.
  bool Running();

  // SIGTERM to the process group, SIGKILL after `grace`; removes the cache dir. Safe to call twice.
  void Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(10000));

  // The last `max_bytes` of the log, for error messages.
  std::string LogTail(size_t max_bytes = 4000) const;
  const std::string& log_path() const { return log_path_; }
  // The process group of the server (its leader's pid), or -1 when it is not running.
  pid_t process_group() const { return pid_; }
  std::string ExitDescription() const { return exit_description_; }

 private:
  FileSystem* fs_;
  pid_t pid_ = -1;
  int exit_status_ = 0;
  std::string exit_description_;
  std::string log_path_;
  std::string cache_dir_;
};

}  // namespace spk::bench
