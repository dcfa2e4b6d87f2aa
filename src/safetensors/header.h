// The safetensors header: parse and validate the JSON that describes every tensor of a .safetensors
// file (docs/formats.md section 1; reference: huggingface/safetensors safetensors/src/tensor.rs).
//
// A parsed SafetensorsHeader is a plain value: tensors sorted by where their data lies, offsets
// relative to the data buffer (which starts at data_start = 8 + N in the file).
// Thread safety: values and pure functions. Errors: InvalidInput Statuses whose messages name the
// file and the tensor, e.g. "model.safetensors: tensor 'w': data_offsets [0, 10] hold 10 bytes but
// shape [4, 4] of BF16 needs 32".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"

namespace spk {

// Headers longer than this are refused before they are read (the reference's MAX_HEADER_SIZE).
inline constexpr uint64_t kMaxSafetensorsHeaderSize = 100'000'000;

struct TensorEntry {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // relative to the data buffer start; end is exclusive
  uint64_t nbytes() const { return end - begin; }
  // Product of the shape (1 for rank 0). Validated not to overflow when the header was parsed.
  uint64_t num_elements() const;
};

struct SafetensorsHeader {
  // "__metadata__" entries in file order (empty when absent or null).
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<TensorEntry> tensors;  // sorted by begin (data order); ties (empty tensors) by name
  uint64_t data_start = 0;           // 8 + N
  // The entry named `name`, or nullptr. Linear scan: headers hold at most a few thousand tensors.
  const TensorEntry* Find(std::string_view name) const;
};

// Parses and validates the header JSON of a file of `file_size` bytes whose JSON is `header_json`
// (so the data buffer is bytes [8 + header_json.size(), file_size)). `file_label` prefixes
// messages. Rejects: a header over kMaxSafetensorsHeaderSize or running past the file end; invalid
// UTF-8; a byte order mark; invalid JSON or trailing characters; a top level that is not an object;
// duplicate keys in any object; __metadata__ that is not an object of strings (null counts as
// absent); a tensor entry that is not an object, lacks dtype/shape/data_offsets, or has one of the
// wrong type; an unknown dtype; a dimension above 2^63-1; data_offsets that are not two integers,
// end before they begin, or do not tile the data buffer from 0 without gaps or overlaps; a shape x
// dtype size that overflows, ends inside a byte (sub-byte dtypes), or differs from the offsets;
// bytes after the last tensor or a data buffer shorter than the offsets. Accepted like the
// reference: unknown fields inside a tensor entry (ignored), several empty tensors at the same
// offset, rank-0 and zero-size tensors.
Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view file_label,
                                                 std::string_view header_json, uint64_t file_size);

// "[4, 4]": a shape as the messages print it.
std::string ShapeToString(const std::vector<int64_t>& shape);

}  // namespace spk
