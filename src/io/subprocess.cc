#include "io/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace spk {
namespace {

void CloseBoth(int fds[2]) {
  for (int i = 0; i < 2; ++i) {
    if (fds[i] >= 0) ::close(fds[i]);
    fds[i] = -1;
  }
}

// The environment of the child: ours, with each of `env` replacing its name.
std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& env) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    bool replaced = false;
    for (const auto& [name, value] : env) {
      replaced |= std::strncmp(*e, name.c_str(), name.size()) == 0 && (*e)[name.size()] == '=';
    }
    if (!replaced) out.emplace_back(*e);
  }
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

// Reads what is ready on the child's pipes into out/err until both close or `deadline` passes;
// false when the deadline passed first.
bool Drain(int out_fd, int err_fd, std::chrono::steady_clock::time_point deadline, std::string* out,
           std::string* err) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {out, err};
  char buffer[65536];
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    int ready = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) return false;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;  // closed (the caller closes the descriptor)
      }
    }
  }
  return true;
}

}  // namespace

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return std::string("was killed by signal ") + strsignal(WTERMSIG(status));
  }
  return "stopped";
}

Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                 const std::vector<std::pair<std::string, std::string>>& env,
                                 std::chrono::milliseconds timeout) {
  if (argv.empty()) return Status::Usage("RunProcess: no program");
  // Everything the child needs is built before fork: it may only make async-signal-safe calls.
  std::vector<std::string> words = argv;
  std::vector<char*> args;
  for (std::string& w : words) args.push_back(w.data());
  args.push_back(nullptr);
  std::vector<std::string> env_strings = ChildEnvironment(env);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    CloseBoth(out_pipe);
    CloseBoth(err_pipe);
    return Status::IoError(std::string("cannot create pipes: ") + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    CloseBoth(out_pipe);
    CloseBoth(err_pipe);
    return Status::IoError(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {  // child: only async-signal-safe calls until exec
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    ::execvpe(args[0], args.data(), envp.data());
    const char* msg = "cannot run ";
    (void)!::write(STDERR_FILENO, msg, std::strlen(msg));
    (void)!::write(STDERR_FILENO, args[0], std::strlen(args[0]));
    msg = ": ";
    (void)!::write(STDERR_FILENO, msg, 2);
    msg = strerror(errno);
    (void)!::write(STDERR_FILENO, msg, std::strlen(msg));
    (void)!::write(STDERR_FILENO, "\n", 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, so the group exists before we might signal it
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ProcessResult result;
  const bool finished = Drain(out_pipe[0], err_pipe[0], std::chrono::steady_clock::now() + timeout,
                              &result.out, &result.err);
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  if (!finished) {
    ::kill(-pid, SIGKILL);
    result.timed_out = true;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ::kill(-pid, SIGKILL);  // no worker of its group outlives it
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.description =
      result.timed_out ? "ran past its time limit and was killed" : DescribeWaitStatus(status);
  return result;
}

}  // namespace spk
