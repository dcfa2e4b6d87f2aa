// SafetensorsReader: opens one .safetensors file, validates its header against the file (every rule
// of ParseSafetensorsHeader plus the 8-byte length prefix), and reads tensor bytes with pread
// or hands them out as views of the file (mapped, io/mapped_view.h).
//
// Ownership: the reader owns its file handle; TensorEntry references from header() stay valid for
// the reader's lifetime (also across moves). The FileSystem passed to Open must outlive the reader.
// Thread safety: after Open, every const method may be called concurrently (reads are positional).
// Errors: InvalidInput for malformed files, IoError for failed or short reads; messages name the
// file and the tensor.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/status.h"
#include "io/file.h"
#include "safetensors/header.h"

namespace spk {

class SafetensorsReader {
 public:
  static Result<SafetensorsReader> Open(FileSystem* fs, const std::string& path);

  const SafetensorsHeader& header() const { return header_; }
  const std::string& path() const { return file_->path(); }

  // Reads the whole tensor. REQUIRES: `t` is an entry of header(); out.size() == t.nbytes().
  Status ReadTensor(const TensorEntry& t, std::span<uint8_t> out) const;
  // Reads out.size() bytes starting `byte_offset` bytes into the tensor (a block of rows, for
  // streaming). Fails if the slice does not lie inside the tensor.
  Status ReadTensorBytes(const TensorEntry& t, uint64_t byte_offset, std::span<uint8_t> out) const;
  // The same bytes as a view (io/mapped_view.h): mapped rather than copied where the file system
  // maps; consume them with FileView::Consume, which turns a truncation of the file while they
  // are read into an IoError naming the file (and the tensor, added here for errors of View).
  Result<FileView> ViewTensorBytes(const TensorEntry& t, uint64_t byte_offset,
                                   uint64_t length) const;
  // Writes `length` bytes from `byte_offset` into the tensor at `offset` of `out`
  // (WritableFile::CopyFrom: in the kernel where it can), failing as ReadTensorBytes does.
  Status CopyTensorBytes(const TensorEntry& t, uint64_t byte_offset, uint64_t length,
                         WritableFile& out, uint64_t offset) const;

 private:
  SafetensorsReader(std::unique_ptr<RandomAccessFile> file, SafetensorsHeader header)
      : file_(std::move(file)), header_(std::move(header)) {}

  std::unique_ptr<RandomAccessFile> file_;
  SafetensorsHeader header_;
};

}  // namespace spk
