// Writing safetensors files with precomputed offsets: SafetensorsLayout plans the whole file
// (header bytes, where each tensor goes) from names, dtypes and shapes alone, so that workers can
// then write tensor data at its final offset in any order, from many threads, without holding the
// file in memory.
//
// The header is byte-identical to what the Rust safetensors writer (and so Python's save_file)
// writes for the same tensors in the same order: compact JSON, "__metadata__" first (omitted when
// empty), tensors in data order with fields dtype, shape, data_offsets, padded with spaces to a
// multiple of 8 so the data buffer is 8-byte aligned. Plan keeps the caller's order;
// SortLikeReference gives the order the reference writer picks, for byte-identical files.
// Ownership: values. Thread safety: a planned layout is immutable and may be shared across threads.
// Errors: InvalidInput naming the tensor (duplicate or reserved names, invalid UTF-8, sizes that
// overflow or do not fill whole bytes); write errors come from the WritableFile.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "io/file.h"
#include "tensor/dtype.h"

namespace spk {

struct TensorSpec {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
};

// Sorts `specs` the way the reference writer (safetensors `prepare`) orders tensors in the file:
// by dtype, widest alignment first (descending order of the reference's Dtype enum, which DType
// mirrors), then by name (bytewise).
void SortLikeReference(std::vector<TensorSpec>& specs);

class SafetensorsLayout {
 public:
  static Result<SafetensorsLayout> Plan(
      std::vector<TensorSpec> tensors_in_data_order,
      std::vector<std::pair<std::string, std::string>> metadata = {{"format", "pt"}});

  // The first data_start() bytes of the file: 8-byte little-endian N, N bytes of padded JSON.
  const std::string& header_bytes() const { return header_bytes_; }
  uint64_t data_start() const { return header_bytes_.size(); }
  uint64_t file_size() const { return file_size_; }
  const std::vector<TensorSpec>& tensors() const { return tensors_; }

  // Offset in the file of the first byte of tensor `name`; NotFound for an unknown name.
  Result<uint64_t> AbsoluteOffset(std::string_view name) const;
  // Bytes of tensor `name`. REQUIRES: `name` is one of tensors().
  uint64_t TensorBytes(std::string_view name) const;

 private:
  struct Placement {
    uint64_t begin;  // relative to the data buffer
    uint64_t nbytes;
  };
  const Placement* FindPlacement(std::string_view name) const;

  std::vector<TensorSpec> tensors_;
  std::vector<Placement> placements_;  // parallel to tensors_
  std::unordered_map<std::string, size_t> index_;
  std::string header_bytes_;
  uint64_t file_size_ = 0;
};

// Writes layout.header_bytes() at offset 0 of `f`.
Status WriteSafetensorsHeader(WritableFile& f, const SafetensorsLayout& layout);

}  // namespace spk
