// Progress reporting for long work (quantizing a checkpoint, running a benchmark).
//
// A Progress prints a single, rewritten status line to stderr when stderr is a terminal, and
// nothing otherwise (so logs and --json output stay clean). Progress::Observed() prints nothing but
// keeps the counts for a caller that draws its own bar (the Python module polls Current() and feeds
// tqdm). It is passed in by the caller, never global. Thread safety: every method may be called
// from any thread; output is serialized and rate-limited.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace spk {

class Progress {
 public:
  // `enabled` false makes every call a no-op. Use Progress::ForStderr() for the usual behaviour.
  explicit Progress(bool enabled, std::FILE* out = stderr) : enabled_(enabled), out_(out) {}
  static Progress ForStderr();  // enabled iff stderr is a TTY
  static Progress Disabled() { return Progress(false); }
  static Progress Observed() { return Progress(true, nullptr); }  // counts only, read by Current()

  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  Progress(Progress&& other) noexcept : enabled_(other.enabled_), out_(other.out_) {}

  struct Snapshot {
    std::string what;  // the label of the current task; empty before the first Start()
    uint64_t done = 0;
    uint64_t total = 0;
    bool finished = false;  // Finish() was called after the last Start()
  };
  Snapshot Current() const;

  // Starts a task of `total` units (bytes, requests) labelled `what`.
  void Start(const std::string& what, uint64_t total);
  // Adds `units` of progress; prints at most ten times a second.
  void Advance(uint64_t units);
  // Ends the line.
  void Finish();

 private:
  void PrintLocked(bool force);

  bool enabled_;
  std::FILE* out_;
  mutable std::mutex mu_;
  std::string what_;
  uint64_t total_ = 0;
  uint64_t done_ = 0;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_{};
  std::chrono::steady_clock::time_point last_print_{};
};

}  // namespace spk
