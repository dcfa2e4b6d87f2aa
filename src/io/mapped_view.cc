// FileView (io/mapped_view.h): the mapping, its hints, and the SIGBUS guard of Consume.
#include "io/mapped_view.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <mutex>
#include <utility>

#include "io/file.h"

namespace spk {
namespace {

// The mapped pages one Consume is reading, innermost first. Set and cleared by the thread that
// reads, looked at by the SIGBUS handler on that same thread (the fault is synchronous).
struct Guard {
  const uint8_t* begin;
  const uint8_t* end;
  volatile sig_atomic_t faulted;
  Guard* outer;
};

thread_local Guard* tls_guard = nullptr;

struct sigaction g_previous_sigbus;
uintptr_t g_page_size = 4096;

bool PointsInto(const Guard* g, const void* addr) {
  const auto* a = static_cast<const uint8_t*>(addr);
  return a >= g->begin && a < g->end;
}

// A fault on a guarded view's page: map a page of zeros over it and return, so the faulting read
// runs again and finds zeros; the guard's owner reports the truncation. Anything else goes on to
// the handler that was installed before ours, or gets the default action (the process dies of
// SIGBUS, as it would have without us).
void OnSigbus(int sig, siginfo_t* info, void* context) {
  for (Guard* g = tls_guard; g != nullptr; g = g->outer) {
    if (!PointsInto(g, info->si_addr)) continue;
    void* page =
        reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(info->si_addr) & ~(g_page_size - 1));
    if (::mmap(page, g_page_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
        MAP_FAILED) {
      g->faulted = 1;
      return;
    }
    break;
  }
  const struct sigaction& previous = g_previous_sigbus;
  if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
    previous.sa_sigaction(sig, info, context);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
  } else {
    // Default action: a fault raises it again on return; a signal sent by kill(2) must be re-sent.
    ::signal(sig, SIG_DFL);
    if (info->si_code <= 0) ::raise(sig);
  }
}

void InstallSigbusHandlerOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_page_size = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    struct sigaction action = {};
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &g_previous_sigbus);
  });
}

}  // namespace

FileView::~FileView() { Release(); }

FileView::FileView(FileView&& other) noexcept { *this = std::move(other); }

FileView& FileView::operator=(FileView&& other) noexcept {
  if (this == &other) return *this;
  Release();
  owned_ = std::move(other.owned_);
  data_ = std::exchange(other.data_, nullptr);
  size_ = std::exchange(other.size_, 0);
  map_base_ = std::exchange(other.map_base_, nullptr);
  map_length_ = std::exchange(other.map_length_, 0);
  fd_ = std::exchange(other.fd_, -1);
  offset_ = other.offset_;
  path_ = std::move(other.path_);
  return *this;
}

void FileView::Release() {
  if (map_base_ != nullptr) ::munmap(map_base_, map_length_);
  map_base_ = nullptr;
  owned_.reset();
  data_ = nullptr;
  size_ = 0;
}

FileView FileView::Owned(std::unique_ptr<uint8_t[]> bytes, size_t size) {
  FileView view;
  view.owned_ = std::move(bytes);
  view.data_ = view.owned_.get();
  view.size_ = size;
  return view;
}

Result<FileView> FileView::Map(int fd, const std::string& path, uint64_t offset, uint64_t length) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return IoErrorFromErrno("cannot stat", path, errno);
  const uint64_t file_end = static_cast<uint64_t>(st.st_size);
  if (offset > file_end || length > file_end - offset) {
    return ShortReadError(path, offset, length, file_end);
  }
  FileView view;
  view.path_ = path;
  view.offset_ = offset;
  view.fd_ = fd;
  if (length == 0) return view;
  InstallSigbusHandlerOnce();
  const uint64_t aligned = offset & ~static_cast<uint64_t>(g_page_size - 1);
  const size_t map_length = static_cast<size_t>(offset - aligned + length);
  // MAP_POPULATE maps the block's pages in one go rather than one fault per 16 pages; its reads
  // of a cold page cache are the ones pread would have made (docs/performance.md).
  void* base = ::mmap(nullptr, map_length, PROT_READ, MAP_SHARED | MAP_POPULATE, fd,
                      static_cast<off_t>(aligned));
  if (base == MAP_FAILED) return IoErrorFromErrno("cannot map", path, errno);
  // Hints only: a failure changes nothing but speed.
  (void)::madvise(base, map_length, MADV_SEQUENTIAL);
  (void)::madvise(base, map_length, MADV_WILLNEED);
  view.map_base_ = base;
  view.map_length_ = map_length;
  view.data_ = static_cast<const uint8_t*>(base) + (offset - aligned);
  view.size_ = static_cast<size_t>(length);
  return view;
}

Status FileView::Consume(const std::function<Status(std::span<const uint8_t>)>& consume) const {
  if (!mapped()) return consume({data_, size_});
  Guard guard{static_cast<const uint8_t*>(map_base_),
              static_cast<const uint8_t*>(map_base_) + map_length_, 0, tls_guard};
  struct Scope {
    Guard* guard;
    explicit Scope(Guard* g) : guard(g) {
      tls_guard = g;
      std::atomic_signal_fence(std::memory_order_seq_cst);
    }
    ~Scope() {
      std::atomic_signal_fence(std::memory_order_seq_cst);
      tls_guard = guard->outer;
    }
  };
  Status status;
  {
    Scope scope(&guard);
    status = consume({data_, size_});
  }
  if (guard.faulted == 0) return status;
  struct stat st;
  const uint64_t file_end = ::fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  return ShortReadError(path_, offset_, size_, file_end);
}

}  // namespace spk
