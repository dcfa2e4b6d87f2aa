// ParallelFor: runs fn(i) for i in [0, n) on up to `threads` worker threads, for splitting one
// large tensor into row blocks so that every core works on it.
//
// The caller passes the thread count in (a context, never a global). Work items must be independent
// and write disjoint memory or file ranges, so results do not depend on scheduling. Error policy:
// the first non-OK Status stops the hand-out of further items and is returned (the one with the
// lowest index among those that failed, so the message is deterministic); items already running
// finish. A `cancel` flag, when given, is polled before each item and turns into Status::Cancelled.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>

#include "base/status.h"

namespace spk {

// Number of worker threads to use for `requested` (0 = all hardware threads).
int ResolveThreadCount(int requested);

Status ParallelFor(int threads, size_t n, const std::function<Status(size_t)>& fn,
                   const std::atomic<bool>* cancel = nullptr);

}  // namespace spk
