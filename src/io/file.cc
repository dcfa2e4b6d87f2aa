#include "io/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace spk {

RandomAccessFile::~RandomAccessFile() = default;
WritableFile::~WritableFile() = default;
void WritableFile::StartWriteback(uint64_t /*offset*/, uint64_t /*length*/) {}
FileSystem::~FileSystem() = default;

Status IoErrorFromErrno(const std::string& what, const std::string& path, int err) {
  if (err == ENOSPC || err == EDQUOT) {
    return Status::IoError("disk full while writing " + path + ": free some space and run again");
  }
  return Status::IoError(what + " " + path + ": " + std::strerror(err));
}

Status ShortReadError(const std::string& path, uint64_t offset, uint64_t length,
                      uint64_t file_end) {
  return Status::IoError("unexpected end of file in " + path + ": needed bytes [" +
                         std::to_string(offset) + ", " + std::to_string(offset + length) +
                         ") but the file ends at byte " + std::to_string(file_end) +
                         " (was it truncated or is it still being written?)");
}

namespace {

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
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

 private:
  std::string path_;
  int fd_;
  uint64_t size_;
};

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  const std::string& path() const override { return path_; }

  Status WriteAt(uint64_t offset, std::span<const uint8_t> data) override {
    if (fd_ < 0) return Status::Internal("write to closed file " + path_);
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
};

class PosixFileSystem final : public FileSystem {
 public:
  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return Status::NotFound("no such file: " + path);
      return IoErrorFromErrno("cannot open", path, errno);
    }
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
};

}  // namespace

FileSystem* FileSystem::Default() {
  static PosixFileSystem* fs =
      new PosixFileSystem();  // never destroyed: safe during static teardown
  return fs;
}

}  // namespace spk
