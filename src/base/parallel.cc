#include "base/parallel.h"

#include <algorithm>
#include <mutex>
#include <thread>
#include <vector>

namespace spk {

int ResolveThreadCount(int requested) {
  if (requested > 0) return requested;
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

Status ParallelFor(int threads, size_t n, const std::function<Status(size_t)>& fn,
                   const std::atomic<bool>* cancel) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  size_t error_index = n;
  Status error;
  auto worker = [&] {
    while (!failed.load(std::memory_order_relaxed)) {
      size_t i = next.fetch_add(1);
      if (i >= n) return;
      Status s = (cancel && cancel->load()) ? Status::Cancelled("interrupted") : fn(i);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (i < error_index) {
          error_index = i;
          error = s;
        }
        failed = true;
      }
    }
  };
  size_t count = std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), n);
  if (count <= 1) {
    worker();
    return error;
  }
  std::vector<std::thread> pool;
  pool.reserve(count - 1);
  for (size_t t = 0; t + 1 < count; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  return error;
}

}  // namespace spk
