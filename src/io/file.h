// File abstraction for everything sparkulator reads and writes: positional reads (pread) and writes
// (pwrite) behind small interfaces, so that tests can swap in a FaultInjectingFileSystem.
//
// Ownership: FileSystem::Default() is a process-lifetime singleton that callers never delete. Files
// are returned as std::unique_ptr and close their descriptor when destroyed. Thread safety: ReadAt
// and WriteAt may be called concurrently from several threads on one file object (writes to
// disjoint ranges); Sync and Close must not race with writes. Errors: every failure is an IoError
// Status whose message names the path and the OS error; a disk that fills up reads "disk full while
// writing <path>". A short read (the file is shorter than expected, e.g. truncated while we read
// it) is an IoError too, never a silently zero-filled buffer.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/status.h"

namespace spk {

class RandomAccessFile {
 public:
  virtual ~RandomAccessFile();
  virtual const std::string& path() const = 0;
  // Size in bytes when the file was opened.
  virtual uint64_t size() const = 0;
  // Reads exactly out.size() bytes starting at `offset`, or fails.
  virtual Status ReadAt(uint64_t offset, std::span<uint8_t> out) const = 0;
};

class WritableFile {
 public:
  virtual ~WritableFile();
  virtual const std::string& path() const = 0;
  // Writes all of `data` at `offset` (the file grows as needed).
  virtual Status WriteAt(uint64_t offset, std::span<const uint8_t> data) = 0;
  // Flushes written data to stable storage (fsync).
  virtual Status Sync() = 0;
  // A hint: start writing [offset, offset + length) to the disk now, without waiting for it
  // (sync_file_range(SYNC_FILE_RANGE_WRITE) on Linux), so that writeback overlaps the work still
  // to come and the final Sync has little left to wait for. Errors are not reported here; Sync
  // reports them. The default does nothing.
  virtual void StartWriteback(uint64_t offset, uint64_t length);
  // Closes the file; later writes fail. Closing twice is OK.
  virtual Status Close() = 0;
};

// Whether a finished output must be on stable storage before it is reported done. kSynced (the
// default everywhere) fsyncs files and folders before the atomic rename, so a power loss never
// leaves a complete-looking checkpoint with missing data; kPageCache leaves writeback to the
// kernel, as cp does: the rename is still atomic against a crash of sparkulator itself.
enum class Durability { kSynced, kPageCache };

class FileSystem {
 public:
  virtual ~FileSystem();
  virtual Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) = 0;
  // Creates `path` (mode 0644) or truncates an existing file.
  virtual Result<std::unique_ptr<WritableFile>> CreateForWrite(const std::string& path) = 0;

  // The POSIX file system (pread/pwrite, O_CLOEXEC).
  static FileSystem* Default();
};

// "<what> <path>: <strerror(err)>", the common shape of an OS error message.
Status IoErrorFromErrno(const std::string& what, const std::string& path, int err);
// The error for a read of [offset, offset+length) that found the file ending at `file_end`.
Status ShortReadError(const std::string& path, uint64_t offset, uint64_t length, uint64_t file_end);

}  // namespace spk
