#include "io/fs_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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

}  // namespace

Result<std::string> ReadWholeFile(const std::string& path) {
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

Status WriteWholeFile(const std::string& path, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoErrorFromErrno("cannot create", path, errno);
  Status status = WriteAll(fd, path, data.data(), data.size());
  if (::close(fd) != 0 && status.ok()) status = IoErrorFromErrno("cannot close", path, errno);
  return status;
}

Status CopyFile(const std::string& src, const std::string& dst) {
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
    if (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP) {
      // Not supported here; continue from the current offsets with plain reads and writes.
      return CopyByReadWrite(in, out, src, dst);
    }
    return IoErrorFromErrno("cannot copy " + src + " to", dst, errno);
  }
}

Result<std::vector<std::string>> ListDirectory(const std::string& dir) {
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

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace spk
