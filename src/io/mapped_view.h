// FileView: a read-only window on a byte range of an open file, so that a reader can consume a
// file's bytes straight from the page cache instead of copying them into a buffer first. A view
// holds either a mapping of the range (mmap of the pages that cover it, MAP_POPULATE, with
// MADV_SEQUENTIAL and MADV_WILLNEED hints; RandomAccessFile::View of the POSIX file system) or a
// buffer the range was read into (the default RandomAccessFile::View: any other file, a
// fault-injecting one included, and the POSIX file under SPARKULATOR_READ=pread).
//
// A mapped file that is truncated under us makes the next touch of a page past its new end raise
// SIGBUS. Consume() guards the reads: while its callback runs, a SIGBUS on the view's pages is
// caught (a handler installed once per process; a SIGBUS anywhere else goes on to the handler
// that was there before, or kills the process as it would have), the missing page is replaced by
// a page of zeros so that the callback runs to its end, and Consume returns an IoError naming the
// path. No longjmp: the callback's destructors all run. A file found shorter than the range when
// the view is made is the same IoError at once (fstat). Under AddressSanitizer this needs its
// default handle_sigbus=1 (ours is installed after ASan's and chains to it); handle_sigbus=2
// blocks our handler, and a truncation then ends the process.
//
// Ownership: a FileView owns its mapping (munmap when destroyed) or its buffer; it is movable, not
// copyable. A mapped view borrows the descriptor of the file it maps, for the error message only:
// the RandomAccessFile must outlive its views. Thread safety: distinct views may be consumed from
// distinct threads; the guard is per thread. Errors: IoError naming the path (mmap failed, the
// range lies past the end of the file, the file shrank while being read).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "base/status.h"

namespace spk {

class FileView {
 public:
  FileView() = default;
  ~FileView();
  FileView(FileView&& other) noexcept;
  FileView& operator=(FileView&& other) noexcept;
  FileView(const FileView&) = delete;
  FileView& operator=(const FileView&) = delete;

  // The bytes of a buffer the caller has already read, owned by the view.
  static FileView Owned(std::unique_ptr<uint8_t[]> bytes, size_t size);
  // A mapping of [offset, offset + length) of the file open as `fd`, named `path` in errors.
  // IoError naming the path when the file (fstat now) ends before offset + length or mmap fails.
  // An empty range maps nothing.
  static Result<FileView> Map(int fd, const std::string& path, uint64_t offset, uint64_t length);

  size_t size() const { return size_; }
  // Whether the bytes come from a mapping (false: from a buffer).
  bool mapped() const { return map_base_ != nullptr; }

  // Runs `consume` on the view's bytes and returns its Status, or, when the mapped file was
  // truncated while `consume` read it, an IoError naming the path (the bytes `consume` saw past
  // the new end were zeros; whatever it made of them must be thrown away). `consume` must not
  // keep the span beyond its return.
  Status Consume(const std::function<Status(std::span<const uint8_t>)>& consume) const;

 private:
  void Release();

  std::unique_ptr<uint8_t[]> owned_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  // The mapping, page-aligned, when mapped.
  void* map_base_ = nullptr;
  size_t map_length_ = 0;
  int fd_ = -1;
  uint64_t offset_ = 0;
  std::string path_;
};

}  // namespace spk
