#include "base/progress.h"

#include <unistd.h>

namespace spk {

Progress Progress::ForStderr() { return Progress(isatty(STDERR_FILENO) == 1); }

void Progress::Start(const std::string& what, uint64_t total) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  what_ = what;
  total_ = total;
  done_ = 0;
  finished_ = false;
  start_ = std::chrono::steady_clock::now();
  PrintLocked(true);
}

void Progress::Advance(uint64_t units) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  done_ += units;
  PrintLocked(false);
}

void Progress::Finish() {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  finished_ = true;
  if (out_ == nullptr) return;
  PrintLocked(true);
  std::fputc('\n', out_);
  std::fflush(out_);
}

Progress::Snapshot Progress::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Snapshot{what_, done_, total_, finished_};
}

void Progress::PrintLocked(bool force) {
  if (out_ == nullptr) return;  // Observed(): counts only
  auto now = std::chrono::steady_clock::now();
  if (!force && now - last_print_ < std::chrono::milliseconds(100)) return;
  last_print_ = now;
  double seconds = std::chrono::duration<double>(now - start_).count();
  double pct = total_ ? 100.0 * static_cast<double>(done_) / static_cast<double>(total_) : 100.0;
  double mib_s = seconds > 0 ? static_cast<double>(done_) / (1 << 20) / seconds : 0.0;
  std::fprintf(out_, "\r%s: %5.1f%% (%.1f MiB/s, %.1f s)   ", what_.c_str(), pct, mib_s, seconds);
  std::fflush(out_);
}

}  // namespace spk
