// The POSIX FileSystem behind FileSystem::Default(): the only place that calls open/pread/pwrite,
// copy_file_range, readdir, rename, fsync, lstat, readlink and realpath for files (see io/file.h
// for the contract), and the one that maps files (io/mapped_view.h).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "io/file.h"

namespace spk {
namespace {

// Closes a descriptor when it goes out of scope.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

Status OpenError(const std::string& path, int err) {
  if (err == ENOENT) return Status::NotFound("no such file: " + path);
  return IoErrorFromErrno("cannot open", path, err);
}

Status WriteAll(int fd, const std::string& path, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoErrorFromErrno("cannot write", path, errno);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Whether copy_file_range failed with `err` because it cannot copy between these files (file
// systems, kernel), so that plain reads and writes must do the copy instead.
bool KernelCopyUnsupported(int err) {
  return err == EXDEV || err == ENOSYS || err == EINVAL || err == EOPNOTSUPP;
}

// Copies with read/write, for file systems where copy_file_range is unsupported.
Status CopyByReadWrite(int in, int out, const std::string& src, const std::string& dst) {
  std::string buffer(1 << 20, '\0');
  while (true) {
    ssize_t n = ::read(in, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoErrorFromErrno("cannot read", src, errno);
    }
    if (n == 0) return Status::Ok();
    SPK_RETURN_IF_ERROR(WriteAll(out, dst, buffer.data(), static_cast<size_t>(n)));
  }
}

// Whether View maps (the default) or reads into a buffer: SPARKULATOR_READ=pread forces the
// copying path (docs/performance.md), read when a file is opened so that a test can switch it.
bool MapForViews() {
  const char* mode = std::getenv("SPARKULATOR_READ");
  return mode == nullptr || std::strcmp(mode, "pread") != 0;
}

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size), map_(MapForViews()) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }

  const std::string& path() const override { return path_; }
  uint64_t size() const override { return size_; }

  Status ReadAt(uint64_t offset, std::span<uint8_t> out) const override {
    size_t done = 0;
    while (done < out.size()) {
      ssize_t n =
          ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return IoErrorFromErrno("cannot read", path_, errno);
      }
      if (n == 0) {
        return ShortReadError(path_, offset, out.size(), offset + done);
      }
      done += static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  Result<FileView> View(uint64_t offset, uint64_t length) const override {
    if (!map_) return RandomAccessFile::View(offset, length);
    return FileView::Map(fd_, path_, offset, length);
  }

  // The descriptor to copy from in the kernel, or -1 under SPARKULATOR_READ=pread, which selects
  // copies through user memory for copies as for views.
  int KernelCopyFd() const { return map_ ? fd_ : -1; }

 private:
  std::string path_;
  int fd_;
  uint64_t size_;
  bool map_;
};

// Writes to one file are serialized here, on a mutex its waiters sleep on: ext4 serializes
// buffered writes to a file on its inode lock anyway, and a waiter for that lock spins while the
// owner copies (14% of a W8A8 quantize's CPU in rwsem_spin_on_owner with two workers; with this
// mutex the run took 0.89 of the wall time and 0.82 of the CPU, docs/performance.md).
class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  const std::string& path() const override { return path_; }

  Status WriteAt(uint64_t offset, std::span<const uint8_t> data) override {
    if (fd_ < 0) return Status::Internal("write to closed file " + path_);
    const std::lock_guard<std::mutex> one_writer(write_mutex_);
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n =
          ::pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return IoErrorFromErrno("cannot write", path_, errno);
      }
      done += static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  Status CopyFrom(uint64_t offset, const RandomAccessFile& source, uint64_t source_offset,
                  uint64_t length) override {
    const auto* posix = dynamic_cast<const PosixRandomAccessFile*>(&source);
    const int in = posix == nullptr ? -1 : posix->KernelCopyFd();
    if (fd_ < 0 || in < 0) return WritableFile::CopyFrom(offset, source, source_offset, length);
    std::unique_lock<std::mutex> one_writer(write_mutex_);
    uint64_t done = 0;
    while (done < length) {
      auto from = static_cast<off64_t>(source_offset + done);
      auto to = static_cast<off64_t>(offset + done);
      const ssize_t n = ::copy_file_range(in, &from, fd_, &to, length - done, 0);
      if (n > 0) {
        done += static_cast<uint64_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      // Nothing copied: the source ended early (the copy by hand then names it), or some kernels'
      // answer for file systems they cannot copy between; an error of that kind: the rest through
      // user memory.
      if (n == 0 || KernelCopyUnsupported(errno)) {
        one_writer.unlock();  // the copy by hand takes it for each WriteAt
        return WritableFile::CopyFrom(offset + done, source, source_offset + done, length - done);
      }
      // ENOSPC and EDQUOT are this file's; anything else may be either side's, so both are named.
      return IoErrorFromErrno("cannot copy from " + source.path() + " into", path_, errno);
    }
    return Status::Ok();
  }

  Status Sync() override {
    if (fd_ < 0) return Status::Internal("sync of closed file " + path_);
    if (::fsync(fd_) != 0) return IoErrorFromErrno("cannot sync", path_, errno);
    return Status::Ok();
  }

  void StartWriteback(uint64_t offset, uint64_t length) override {
#if defined(__linux__)
    if (fd_ >= 0) {
      (void)::sync_file_range(fd_, static_cast<off64_t>(offset), static_cast<off64_t>(length),
                              SYNC_FILE_RANGE_WRITE);
    }
#else
    (void)offset;
    (void)length;
#endif
  }

  Status Close() override {
    if (fd_ < 0) return Status::Ok();
    int rc = ::close(fd_);
    fd_ = -1;
    // Some file systems (NFS) report deferred write errors only at close.
    if (rc != 0 && errno != EINTR) return IoErrorFromErrno("cannot close", path_, errno);
    return Status::Ok();
  }

 private:
  std::string path_;
  int fd_;
  std::mutex write_mutex_;  // held by WriteAt and the kernel copy of CopyFrom
};

class PosixFileSystem final : public FileSystem {
 public:
  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return OpenError(path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      return IoErrorFromErrno("cannot stat", path, err);
    }
    if (S_ISDIR(st.st_mode)) {
      ::close(fd);
      return Status::InvalidInput(path + " is a folder, expected a file");
    }
    return std::unique_ptr<RandomAccessFile>(
        new PosixRandomAccessFile(path, fd, static_cast<uint64_t>(st.st_size)));
  }

  Result<std::unique_ptr<WritableFile>> CreateForWrite(const std::string& path) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return IoErrorFromErrno("cannot create", path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  Result<std::string> ReadFile(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return OpenError(path, errno);
    FdCloser closer(fd);
    std::string contents;
    char buffer[1 << 16];
    while (true) {
      ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n < 0) {
        if (errno == EINTR) continue;
        return IoErrorFromErrno("cannot read", path, errno);
      }
      if (n == 0) return contents;
      contents.append(buffer, static_cast<size_t>(n));
    }
  }

  Status WriteFile(const std::string& path, std::string_view data) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return IoErrorFromErrno("cannot create", path, errno);
    Status status = WriteAll(fd, path, data.data(), data.size());
    if (::close(fd) != 0 && status.ok()) status = IoErrorFromErrno("cannot close", path, errno);
    return status;
  }

  // In the kernel where possible (copy_file_range), falling back to read/write.
  Status CopyFile(const std::string& src, const std::string& dst) override {
    int in = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) return OpenError(src, errno);
    FdCloser in_closer(in);
    int out = ::open(dst.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) return IoErrorFromErrno("cannot create", dst, errno);
    FdCloser out_closer(out);
    while (true) {
      ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, size_t{1} << 30, 0);
      if (n == 0) return Status::Ok();
      if (n > 0) continue;
      if (errno == EINTR) continue;
      if (KernelCopyUnsupported(errno)) {
        // Not supported here; continue from the current offsets with plain reads and writes.
        return CopyByReadWrite(in, out, src, dst);
      }
      return IoErrorFromErrno("cannot copy " + src + " to", dst, errno);
    }
  }

  FileKind KindOf(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return FileKind::kMissing;
    if (S_ISREG(st.st_mode)) return FileKind::kFile;
    if (S_ISDIR(st.st_mode)) return FileKind::kDirectory;
    return FileKind::kOther;
  }

  Result<std::vector<std::string>> ListDirectory(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      if (errno == ENOENT) return Status::NotFound("no such folder: " + dir);
      return IoErrorFromErrno("cannot list", dir, errno);
    }
    std::vector<std::string> names;
    errno = 0;
    while (struct dirent* entry = ::readdir(d)) {
      std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(std::move(name));
    }
    int err = errno;
    ::closedir(d);
    if (err != 0) return IoErrorFromErrno("cannot list", dir, err);
    std::sort(names.begin(), names.end());
    return names;
  }

  Status CreateDirectory(const std::string& path) override {
    if (::mkdir(path.c_str(), 0755) == 0) return Status::Ok();
    if (errno == EEXIST) return Status::AlreadyExists(path + " already exists");
    return IoErrorFromErrno("cannot create folder", path, errno);
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return IoErrorFromErrno("cannot rename " + from + " to", to, errno);
    }
    return Status::Ok();
  }

  Status RemoveAll(const std::string& path) override {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (ec) return Status::IoError("cannot remove " + path + ": " + ec.message());
    return Status::Ok();
  }

  Status SyncPath(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return IoErrorFromErrno("cannot open for sync", path, errno);
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0) return IoErrorFromErrno("cannot sync", path, err);
    return Status::Ok();
  }

  bool IsLink(const std::string& path) override {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
  }

  Result<std::string> ReadLink(const std::string& path) override {
    std::string target(PATH_MAX, '\0');
    ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
    if (n < 0) {
      if (errno == EINVAL) return Status::InvalidInput(path + " is not a link");
      if (errno == ENOENT) return Status::NotFound("no such link: " + path);
      return IoErrorFromErrno("cannot read link", path, errno);
    }
    target.resize(static_cast<size_t>(n));
    return target;
  }

  Result<std::string> RealPath(const std::string& path) override {
    char* real = ::realpath(path.c_str(), nullptr);
    if (real == nullptr) {
      if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) {
        return Status::NotFound("no such file or folder: " + path + ": " + std::strerror(errno));
      }
      return IoErrorFromErrno("cannot resolve", path, errno);
    }
    std::string result = real;
    std::free(real);
    return result;
  }
};

}  // namespace

FileSystem* FileSystem::Default() {
  static PosixFileSystem* fs =
      new PosixFileSystem();  // never destroyed: safe during static teardown
  return fs;
}

}  // namespace spk
