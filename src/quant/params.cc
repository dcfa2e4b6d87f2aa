#include "quant/params.h"

#include <cassert>
#include <string>

namespace spk {

Status ValidateParams(const QuantParams& params) {
  if (params.bits < kMinIntBits || params.bits > kMaxIntBits) {
    return Status::Usage("quantization bits must be 2 to 8 (vLLM's WNA16 widths), got " +
                         std::to_string(params.bits));
  }
  if (params.group_size <= 0 && params.group_size != kChannelWise) {
    return Status::Usage("group size must be positive, or -1 for channel-wise, got " +
                         std::to_string(params.group_size));
  }
  return Status::Ok();
}

bool GroupFits(int64_t cols, int64_t group_size) {
  if (cols <= 0) return false;
  if (group_size == kChannelWise) return true;
  return group_size > 0 && cols % group_size == 0;
}

int64_t GroupWidth(int64_t cols, int64_t group_size) {
  return group_size == kChannelWise ? cols : group_size;
}

int64_t GroupsPerRow(int64_t cols, int64_t group_size) {
  assert(GroupFits(cols, group_size));
  return group_size == kChannelWise ? 1 : cols / group_size;
}

int64_t PackedWords(int64_t count, int bits) { return (count * bits + 31) / 32; }

std::vector<int64_t> PackedShape(int64_t rows, int64_t cols, int bits) {
  return {rows, PackedWords(cols, bits)};
}

std::vector<int64_t> ScaleShape(int64_t rows, int64_t cols, int64_t group_size) {
  return {rows, GroupsPerRow(cols, group_size)};
}

std::vector<int64_t> ZeroPointShape(int64_t rows, int64_t cols, int bits, int64_t group_size) {
  return {PackedWords(rows, bits), GroupsPerRow(cols, group_size)};
}

}  // namespace spk
