// The parameters of one integer quantization of one tensor (bits, symmetry, group size) and the
// tensor shapes they imply for compressed-tensors' `pack-quantized` layout (docs/formats.md section
// 2).
//
// This is the vocabulary of the kernels (quant/rtn.h, quant/search.h, quant/simd/): it knows
// nothing of scheme names or checkpoints. The registry of schemes (quant/scheme.h) sits above it
// and derives these parameters from its rows. Pure functions over values: thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace spk {

// Channel-wise quantization (one scale per output row) is written as group_size -1, as in
// compressed-tensors' QuantizationArgs.
inline constexpr int64_t kChannelWise = -1;

// The integer widths sparkulator writes: vLLM's WNA16 scheme takes 2..8 bits
// (compressed_tensors_wNa16.py WNA16_SUPPORTED_TYPES_MAP); compressed-tensors packs 1..8.
inline constexpr int kMinIntBits = 2;
inline constexpr int kMaxIntBits = 8;

// What the quantizer needs to know about a scheme for one tensor.
struct QuantParams {
  int bits = 4;
  bool symmetric = true;
  int64_t group_size = 128;  // columns per scale; kChannelWise (-1) = one scale per row
};

// Integer range of a `bits`-bit signed value: [-2^(bits-1), 2^(bits-1)-1] (int4: -8..7).
inline int32_t QMin(int bits) { return -(int32_t{1} << (bits - 1)); }
inline int32_t QMax(int bits) { return (int32_t{1} << (bits - 1)) - 1; }

// Ok when the parameters are ones sparkulator writes: bits 2..8, group_size positive or -1.
Status ValidateParams(const QuantParams& params);
// True when a weight with `cols` input columns can be quantized with `group_size`: channel-wise
// always, groups when cols is a positive multiple of group_size (compressed-tensors refuses ragged
// groups).
bool GroupFits(int64_t cols, int64_t group_size);
// Columns covered by one scale: group_size, or all of `cols` for channel-wise.
int64_t GroupWidth(int64_t cols, int64_t group_size);
// Scales per row: cols / group_size, or 1 for channel-wise. REQUIRES: GroupFits(cols, group_size).
int64_t GroupsPerRow(int64_t cols, int64_t group_size);
// int32 words holding `count` packed `bits`-bit values: ceil(count * bits / 32).
int64_t PackedWords(int64_t count, int bits);

// weight_packed: [rows, ceil(cols * bits / 32)] int32 ([rows, cols/8] for 4-bit when 8 | cols):
// a dense bit stream, so 3/5/6/7-bit values straddle words and the last word's high bits are 0.
std::vector<int64_t> PackedShape(int64_t rows, int64_t cols, int bits);
// weight_scale: [rows, cols / group_size], or [rows, 1] for channel-wise.
std::vector<int64_t> ScaleShape(int64_t rows, int64_t cols, int64_t group_size);
// weight_zero_point (asymmetric only): [ceil(rows * bits / 32), groups], packed along the row dim.
std::vector<int64_t> ZeroPointShape(int64_t rows, int64_t cols, int bits, int64_t group_size);

}  // namespace spk
