// FaultInjectingFileSystem: a FileSystem for tests that wraps a real one and makes it fail on
// purpose, so that error paths (disk full, I/O errors, truncated inputs) can be tested without a
// broken disk, at every kind of operation: shard data, whole files (config.json, the index),
// copies (tokenizer.json), listings, folders, renames and syncs.
//
// Faults (set with the setters, cleared with ClearFaults):
//   - SetWriteLimit(n): once writes would bring the total bytes written through this file system
//     past n, that write and every later one fail like ENOSPC ("disk full while writing <path>").
//     Whole-file writes and copies count too.
//   - FailReadsFrom(path, offset): a read of `path` that touches any byte at or after `offset`
//     fails like EIO (whole-file reads and copies from `path` too, when the file reaches it).
//   - TruncateFile(path, size): `path` appears to be only `size` bytes long (size() and reads), as
//     if it had been truncated.
//   - FailOperation(op, target, err): every `op` on a path that is `target`, or whose last
//     component is `target` (so "config.json" also hits the one inside a random temporary
//     folder), fails with errno `err`: ENOSPC reads "disk full while writing <path>", EIO
//     "cannot <op> <path>: Input/output error". kRead covers reads of an opened file, whole-file
//     reads and the source of a copy; kWrite covers writes, whole-file writes and the
//     destination of a copy; kRename matches either end; kResolve covers ReadLink and RealPath
//     ("cannot resolve <path>"), where links are followed.
// Ownership: the wrapped FileSystem must outlive this object and every file it opened. Files opened
// here share the fault settings, so faults set after opening still apply. Thread safety: all
// methods, including those of the files, may be called from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "io/file.h"

namespace spk {

enum class FileOp { kRead, kWrite, kList, kCreateDirectory, kRename, kRemove, kSync, kResolve };

class FaultInjectingFileSystem final : public FileSystemWrapper {
 public:
  explicit FaultInjectingFileSystem(FileSystem* base);
  ~FaultInjectingFileSystem() override;

  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> CreateForWrite(const std::string& path) override;
  // Whole-file reads, writes and copies go through OpenForRead/CreateForWrite above, so that every
  // read and write fault applies to them as to shard data. A file whose stat size is 0 (a /proc
  // file) is read to its end by the wrapped file system, after the FailOperation(kRead) check.
  Result<std::string> ReadFile(const std::string& path) override;
  Status WriteFile(const std::string& path, std::string_view data) override;
  Status CopyFile(const std::string& from, const std::string& to) override;
  Result<std::vector<std::string>> ListDirectory(const std::string& dir) override;
  Status CreateDirectory(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status RemoveAll(const std::string& path) override;
  Status SyncPath(const std::string& path) override;
  Result<std::string> ReadLink(const std::string& path) override;
  Result<std::string> RealPath(const std::string& path) override;

  void SetWriteLimit(uint64_t max_total_bytes);
  void FailReadsFrom(const std::string& path, uint64_t offset);
  void TruncateFile(const std::string& path, uint64_t apparent_size);
  void FailOperation(FileOp op, const std::string& target, int err);
  void ClearFaults();

  // Bytes written successfully through this file system so far.
  uint64_t bytes_written() const;
  // Sync and StartWriteback calls made on files this file system created.
  uint64_t syncs() const;
  uint64_t writeback_hints() const;

  struct Faults;  // shared with the files it opens

 private:
  std::shared_ptr<Faults> faults_;
};

}  // namespace spk
