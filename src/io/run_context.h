// What every entry point of the library (quantize, dequantize, inspect, check, compare, merge,
// card, bench) is run with, besides its own options: the file system it reads and writes through,
// where it reports progress, the flag that cancels it, and how many worker threads it may use. One
// shape for all, first argument of each (`Result<R> Xxx(const RunContext& run, const XxxOptions&
// o)`), so the CLI, the Python module and the tests hand over the same four things the same way,
// and an entry point's options say only what the job is.
//
// Ownership: a RunContext points to things its caller owns and keeps alive for the call.
// Thread safety: the entry point may read `cancel` and update `progress` from its workers.
// Errors: none of its own.
#pragma once

#include <atomic>

#include "base/progress.h"
#include "io/file.h"

namespace spk {

struct RunContext {
  FileSystem* fs = FileSystem::Default();
  // Where byte counts go as the job runs; nullptr: nowhere.
  Progress* progress = nullptr;
  // Polled between row blocks (Ctrl-C): when it turns true the job stops with Status::Cancelled and
  // removes what it had begun to write; nullptr: never cancelled.
  const std::atomic<bool>* cancel = nullptr;
  int threads = 0;  // worker threads; 0: all cores. No output depends on it.
};

}  // namespace spk
