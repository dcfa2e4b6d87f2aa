// Running a helper program to its end and collecting what it printed: `check --vllm DIR` asks that
// tree's Python to build vLLM's module map (check/vllm_map_build.h). The child runs in its own
// process group with stdin from /dev/null, SIGINT and SIGPIPE at their defaults, and dies with
// the parent (PR_SET_PDEATHSIG); past its time limit the whole group is killed.
//
// Owns nothing past the call; thread-safe (no shared state; the environment is copied before
// fork). Errors: IoError when the pipes or the fork fail. A program that cannot be started, exits
// non-zero or is killed is not an error of RunProcess: ProcessResult says so (exec failures exit
// 127 with the reason on stderr).
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace spk {

struct ProcessResult {
  int exit_code = -1;       // the exit status, or -1 when killed by a signal
  bool timed_out = false;   // killed at the time limit
  std::string out, err;     // everything it wrote to stdout and stderr
  std::string description;  // "exited with status 1", "was killed by signal Killed"
  bool ok() const { return exit_code == 0 && !timed_out; }
};

// Runs argv[0] (looked up on PATH when it has no slash) with argv, the current environment plus
// `env` (each NAME=VALUE replacing any NAME), until it exits or `timeout` passes.
Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                 const std::vector<std::pair<std::string, std::string>>& env,
                                 std::chrono::milliseconds timeout);

// waitpid's status in words: "exited with status 3", "was killed by signal Killed".
std::string DescribeWaitStatus(int status);

}  // namespace spk
