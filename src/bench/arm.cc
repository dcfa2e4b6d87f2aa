#include "bench/arm.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <unistd.h>
#include <cerrno>
extern char** environ;
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/strings.h"
#include "io/subprocess.h"

namespace spk::bench {

Result<std::vector<std::string>> SplitCommandLine(std::string_view line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\') {
      if (++i >= line.size())
        return Status::Usage("command ends with a lone backslash: " + std::string(line));
      word.push_back(line[i]);
    } else if (c == '\'') {
      size_t end = line.find('\'', i + 1);
      if (end == std::string_view::npos)
        return Status::Usage("unclosed ' in command: " + std::string(line));
      word.append(line.substr(i + 1, end - i - 1));
      i = end;
    } else if (c == '"') {
      for (++i;; ++i) {
        if (i >= line.size()) return Status::Usage("unclosed \" in command: " + std::string(line));
        if (line[i] == '"') break;
        if (line[i] == '\\' && i + 1 < line.size() && std::strchr("\"\\$`", line[i + 1]) != nullptr)
          ++i;
        word.push_back(line[i]);
      }
    } else {
      word.push_back(c);
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

Result<ArmSpec> ParseArmSpec(std::string_view text) {
  size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return Status::Usage("--arm '" + std::string(text) +
                         "': expected NAME=http://host:port or NAME=cmd:COMMAND");
  }
  ArmSpec arm;
  arm.name = std::string(text.substr(0, eq));
  std::string_view target = text.substr(eq + 1);
  if (target.substr(0, 4) == "cmd:") {
    Result<std::vector<std::string>> words = SplitCommandLine(target.substr(4));
    if (!words.ok()) return words.status().WithContext("--arm " + arm.name);
    arm.command = std::move(words).value();
    if (arm.command.empty())
      return Status::Usage("--arm " + arm.name + ": empty command after cmd:");
    return arm;
  }
  SPK_RETURN_IF_ERROR(http::ParseUrl(target).status().WithContext("--arm " + arm.name));
  arm.url = std::string(target);
  return arm;
}

// Binds 127.0.0.1:`port` (0: any) and releases it; the port bound, or -1 when it is taken.
Result<int> TryBindLoopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoError(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    if (port != 0 && errno == EADDRINUSE) return -1;
    return Status::IoError(std::string("cannot find a free port: ") + std::strerror(errno));
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

Result<int> FindFreePort(int first, int last) {
  if (first == 0) return TryBindLoopback(0);
  for (int port = first; port <= last; ++port) {
    SPK_ASSIGN_OR_RETURN(int bound, TryBindLoopback(port));
    if (bound > 0) return bound;
  }
  return Status::Unavailable(
      fmt::format("no free port in --port-range {}-{} on 127.0.0.1", first, last));
}

LaunchedServer::~LaunchedServer() { Stop(); }

Status LaunchedServer::Start(std::vector<std::string> argv, int port, const std::string& log_path) {
  for (std::string& word : argv) word = ReplaceAll(word, "{port}", std::to_string(port));
  log_path_ = log_path;
  // $TMPDIR, else /tmp, as std::filesystem::temp_directory_path.
  const char* tmp = std::getenv("TMPDIR");
  std::string cache_template =
      JoinPath(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "spk-bench-cache-XXXXXX");
  if (::mkdtemp(cache_template.data()) == nullptr) {
    return Status::IoError("cannot create a cache dir for the server: " +
                           std::string(std::strerror(errno)));
  }
  cache_dir_ = cache_template;
  // The one file not opened through fs_: the child's stdout and stderr need a descriptor.
  int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return Status::IoError("cannot create server log " + log_path + ": " + std::strerror(errno));
  }
  std::vector<char*> args;
  for (std::string& word : argv) args.push_back(word.data());
  args.push_back(nullptr);
  // The environment is built before fork: the child may only make async-signal-safe calls.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "VLLM_CACHE_ROOT=", 16) != 0) env_strings.emplace_back(*e);
  }
  env_strings.push_back("VLLM_CACHE_ROOT=" + cache_dir_);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    return Status::IoError(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {  // child: only async-signal-safe calls until exec
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    ::execvpe(args[0], args.data(), envp.data());
    const char* msg = "sparkulator: exec failed: ";
    (void)!::write(STDERR_FILENO, msg, std::strlen(msg));
    (void)!::write(STDERR_FILENO, args[0], std::strlen(args[0]));
    (void)!::write(STDERR_FILENO, "\n", 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, so the group exists before we might signal it
  ::close(log_fd);
  pid_ = pid;
  exit_description_.clear();
  return Status::Ok();
}

bool LaunchedServer::Running() {
  if (pid_ < 0) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_status_ = status;
    exit_description_ = DescribeWaitStatus(status);
    // The leader is gone; make sure no worker of its group lingers.
    ::kill(-pid_, SIGKILL);
    pid_ = -1;
    return false;
  }
  return true;
}

Status LaunchedServer::WaitHealthy(const http::Url& url, std::chrono::seconds timeout,
                                   const std::atomic<bool>* cancel) {
  auto deadline = http::Clock::now() + timeout;
  http::RequestOptions options;
  options.connect_timeout = std::chrono::milliseconds(1000);
  options.idle_timeout = std::chrono::milliseconds(5000);
  options.cancel = cancel;
  while (http::Clock::now() < deadline) {
    if (cancel != nullptr && cancel->load())
      return Status::Cancelled("interrupted while waiting for the server");
    if (!Running()) {
      return Status::Unavailable("the server command " + exit_description_ +
                                 " before it became healthy. Its log (" + log_path_ +
                                 ") ends with:\n" + LogTail());
    }
    for (const char* path : {"/health", "/v1/models"}) {
      auto response = http::Get(url, path, options);
      if (response.ok() && response->status == 200) return Status::Ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return Status::Unavailable(
      "the server did not answer /health within " + std::to_string(timeout.count()) +
      " s (raise --launch-timeout). Its log (" + log_path_ + ") ends with:\n" + LogTail());
}

void LaunchedServer::Stop(std::chrono::milliseconds grace) {
  if (pid_ > 0) {
    ::kill(-pid_, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + grace;
    while (Running() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      exit_description_ = DescribeWaitStatus(status);
      pid_ = -1;
    }
  }
  if (!cache_dir_.empty()) {
    (void)fs_->RemoveAll(cache_dir_);  // best effort: a leftover temp dir harms nothing
    cache_dir_.clear();
  }
}

std::string LaunchedServer::LogTail(size_t max_bytes) const {
  Result<std::string> log = fs_->ReadFile(log_path_);
  if (!log.ok()) return "(cannot read the log: " + log.status().message() + ")";
  std::string text = *log;
  if (text.size() > max_bytes) text = "..." + text.substr(text.size() - max_bytes);
  return text;
}

}  // namespace spk::bench
