// FaultInjectingFileSystem: a FileSystem for tests that wraps a real one and makes it fail on
// purpose, so that error paths (disk full, I/O errors, truncated inputs) can be tested without a
// broken disk.
//
// Faults (set with the setters, cleared with ClearFaults):
//   - SetWriteLimit(n): once writes would bring the total bytes written through this file system
//   past
//     n, that write and every later one fail like ENOSPC ("disk full while writing <path>").
//   - FailReadsFrom(path, offset): a read of `path` that touches any byte at or after `offset`
//   fails like
//     EIO.
//   - TruncateFile(path, size): `path` appears to be only `size` bytes long (size() and reads), as
//   if it
//     had been truncated.
// Ownership: the wrapped FileSystem must outlive this object and every file it opened. Files opened
// here share the fault settings, so faults set after opening still apply. Thread safety: all
// methods, including those of the files, may be called from several threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "io/file.h"

namespace spk {

class FaultInjectingFileSystem final : public FileSystem {
 public:
  explicit FaultInjectingFileSystem(FileSystem* base);
  ~FaultInjectingFileSystem() override;

  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> CreateForWrite(const std::string& path) override;

  void SetWriteLimit(uint64_t max_total_bytes);
  void FailReadsFrom(const std::string& path, uint64_t offset);
  void TruncateFile(const std::string& path, uint64_t apparent_size);
  void ClearFaults();

  // Bytes written successfully through this file system so far.
  uint64_t bytes_written() const;
  // Sync and StartWriteback calls made on files this file system created.
  uint64_t syncs() const;
  uint64_t writeback_hints() const;

  struct Faults;  // shared with the files it opens

 private:
  FileSystem* base_;
  std::shared_ptr<Faults> faults_;
};

}  // namespace spk
