// The quantization scheme registry and the tensor shapes of the compressed-tensors `pack-quantized`
// format (docs/formats.md section 2).
//
// One table (scheme.cc, ggml-style) lists every scheme sparkulator writes; help text, flag
// validation and the tests iterate it, so adding a scheme is one row. The shape helpers are the
// single source of truth for the sizes of weight_packed, weight_scale and weight_zero_point. Pure
// functions over constant data: thread-safe. The table lives for the whole program, so `const
// QuantScheme*` and the string_views in it never dangle.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace spk {

struct QuantScheme {
  std::string_view name;     // "w4a16": the --scheme value
  int bits;                  // weight bits: 4 or 8
  bool symmetric;            // false: the checkpoint carries weight_zero_point
  std::string_view format;   // compressed-tensors format name: "pack-quantized"
  std::string_view summary;  // one line for --help
};

// Every scheme, in help order: w4a16, w4a16-asym, w8a16, w8a16-asym.
std::span<const QuantScheme> AllSchemes();
// The scheme named exactly `name`, or nullptr.
const QuantScheme* FindScheme(std::string_view name);

// Channel-wise quantization (one scale per output row) is written as group_size -1, as in
// compressed-tensors' QuantizationArgs.
inline constexpr int64_t kChannelWise = -1;

// What the quantizer needs to know about a scheme for one tensor.
struct QuantParams {
  int bits = 4;
  bool symmetric = true;
  int64_t group_size = 128;  // columns per scale; kChannelWise (-1) = one scale per row
};
QuantParams ParamsFor(const QuantScheme& scheme, int64_t group_size);

// Integer range of a `bits`-bit signed value: [-2^(bits-1), 2^(bits-1)-1] (int4: -8..7).
inline int32_t QMin(int bits) { return -(int32_t{1} << (bits - 1)); }
inline int32_t QMax(int bits) { return (int32_t{1} << (bits - 1)) - 1; }

// Ok when the parameters are ones sparkulator writes: bits 4 or 8, group_size positive or -1.
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

// weight_packed: [rows, ceil(cols * bits / 32)] int32 ([rows, cols/8] for 4-bit when 8 | cols).
std::vector<int64_t> PackedShape(int64_t rows, int64_t cols, int bits);
// weight_scale: [rows, cols / group_size], or [rows, 1] for channel-wise.
std::vector<int64_t> ScaleShape(int64_t rows, int64_t cols, int64_t group_size);
// weight_zero_point (asymmetric only): [ceil(rows * bits / 32), groups], packed along the row dim.
std::vector<int64_t> ZeroPointShape(int64_t rows, int64_t cols, int bits, int64_t group_size);

}  // namespace spk
