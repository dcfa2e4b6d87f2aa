#include "quant/rtn.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <string>
#include <vector>

#include "tensor/float_convert.h"

namespace spk {
namespace {

// torch.round: round half to even (the default floating-point rounding mode).
float RoundHalfToEven(float x) { return std::nearbyint(x); }

// clamp that lets NaN through, like torch.clamp.
float ClampKeepNaN(float x, float lo, float hi) {
  if (x < lo) return lo;
  if (x > hi) return hi;
  return x;
}

// A float holding an integer in [qmin, qmax] (or NaN) cast to an integer; NaN becomes 0, which is
// what torch's `.to(torch.int8)` produces on x86 and ARM and what compressed-tensors therefore
// writes as the zero point of an all-zero asymmetric group.
int32_t ToIntNaNIsZero(float x) { return std::isnan(x) ? 0 : static_cast<int32_t>(x); }

size_t DTypeBytes(DType dtype) { return DTypeBits(dtype) / 8; }

Status CheckShapeAndParams(const QuantParams& p, DType dtype, int64_t rows, int64_t cols) {
  if (!IsQuantizableFloat(dtype)) {
    return Status::InvalidInput("cannot quantize dtype " + std::string(DTypeName(dtype)) +
                                "; only BF16, F16 and F32 weights are quantized");
  }
  SPK_RETURN_IF_ERROR(ValidateParams(p));
  if (rows < 0 || !GroupFits(cols, p.group_size)) {
    return Status::InvalidInput("a weight of " + std::to_string(rows) + " x " +
                                std::to_string(cols) + " cannot be quantized with group size " +
                                std::to_string(p.group_size) +
                                " (the columns must be a positive multiple of it); leave this "
                                "layer unquantized or use channel-wise (-1)");
  }
  return Status::Ok();
}

// Visits `count` packed values laid out as compressed-tensors' bit stream: value k occupies bits
// [k*bits, k*bits + bits) of the words word(0), word(1), ..., lowest bits first.
template <typename WordAt, typename Visit>
void ForEachPackedSlot(int bits, int64_t count, WordAt word_at, Visit visit) {
  for (int64_t k = 0; k < count; ++k) {
    const int64_t bit = k * bits;
    const int64_t word = bit / 32;
    const int offset = static_cast<int>(bit % 32);
    visit(k, word_at(word), offset, offset + bits > 32 ? &word_at(word + 1) : nullptr);
  }
}

// Packs count values value(k) into words at word_at(0..), see PackRow.
template <typename ValueAt, typename WordAt>
void PackValues(int bits, int64_t count, ValueAt value_at, WordAt word_at) {
  assert(bits >= 1 && bits <= 8);
  const int32_t offset = int32_t{1} << (bits - 1);
  for (int64_t w = 0; w < PackedWords(count, bits); ++w) word_at(w) = 0;
  ForEachPackedSlot(
      bits, count, word_at, [&](int64_t k, int32_t& word, int bit_offset, int32_t* next_word) {
        const int32_t q = value_at(k);
        assert(q >= QMin(bits) && q <= QMax(bits));
        const uint32_t u = static_cast<uint32_t>(q + offset);
        word = static_cast<int32_t>(static_cast<uint32_t>(word) | (u << bit_offset));
        if (next_word != nullptr) {  // the high bits straddle into the next word
          *next_word =
              static_cast<int32_t>(static_cast<uint32_t>(*next_word) | (u >> (32 - bit_offset)));
        }
      });
}

// Unpacks count values into store(k, q), see UnpackRow.
template <typename WordAt, typename Store>
void UnpackValues(int bits, int64_t count, WordAt word_at, Store store) {
  assert(bits >= 1 && bits <= 8);
  const int32_t offset = int32_t{1} << (bits - 1);
  const uint32_t mask = (uint32_t{1} << bits) - 1;
  ForEachPackedSlot(bits, count, word_at,
                    [&](int64_t k, const int32_t& word, int bit_offset, const int32_t* next_word) {
                      uint32_t u = static_cast<uint32_t>(word) >> bit_offset;
                      if (next_word != nullptr) {
                        u |= static_cast<uint32_t>(*next_word) << (32 - bit_offset);
                      }
                      store(k, static_cast<int32_t>(u & mask) - offset);
                    });
}

}  // namespace

float DTypeEps(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return 0x1p-7f;
    case DType::kF16:
      return 0x1p-10f;
    default:
      return 0x1p-23f;
  }
}

GroupRange GroupMinMax(std::span<const float> values) {
  assert(!values.empty());
  GroupRange range{values[0], values[0]};
  for (float v : values) {
    range.min = std::min(range.min, v);
    range.max = std::max(range.max, v);
  }
  return range;
}

GroupQuantParams ComputeGroupScale(const QuantParams& p, DType dtype, GroupRange range) {
  auto r = [dtype](float x) { return RoundToDType(x, dtype); };
  const float qmin = static_cast<float>(QMin(p.bits));
  const float qmax = static_cast<float>(QMax(p.bits));
  const float bit_range = r(qmax - qmin);
  // 0 must be exactly representable, so the range always includes it.
  const float mn = std::min(range.min, 0.0f);
  const float mx = std::max(range.max, 0.0f);

  GroupQuantParams out;
  float zero_point = 0.0f;
  if (p.symmetric) {
    const float absmax = std::max(std::fabs(mn), std::fabs(mx));
    out.scale = r(absmax / r(bit_range / 2.0f));
  } else {
    out.scale = r(r(mx - mn) / bit_range);
    // Uses the scale before the eps fix, as the reference does: an all-zero group gives 0/0 = NaN.
    zero_point = ClampKeepNaN(r(qmin - r(mn / out.scale)), qmin, qmax);
  }
  if (out.scale == 0.0f) out.scale = DTypeEps(dtype);
  out.zero_point = ToIntNaNIsZero(RoundHalfToEven(zero_point));
  return out;
}

void QuantizeGroupWithScale(const QuantParams& p, DType dtype, std::span<const float> w,
                            GroupQuantParams gq, std::span<int8_t> q) {
  assert(q.size() == w.size());
  const float qmin = static_cast<float>(QMin(p.bits));
  const float qmax = static_cast<float>(QMax(p.bits));
  const float zero_point = static_cast<float>(gq.zero_point);
  for (size_t i = 0; i < w.size(); ++i) {
    // The quotient is rounded to the dtype before the zero point is added and before clamping and
    // rounding to an integer; symmetric schemes add zero point 0, which changes nothing.
    const float scaled = RoundToDType(RoundToDType(w[i] / gq.scale, dtype) + zero_point, dtype);
    q[i] = static_cast<int8_t>(RoundHalfToEven(std::clamp(scaled, qmin, qmax)));
  }
}

void DequantizeGroup(DType dtype, std::span<const int8_t> q, GroupQuantParams gq,
                     std::span<float> out) {
  assert(out.size() == q.size());
  for (size_t i = 0; i < q.size(); ++i) {
    const float shifted = RoundToDType(static_cast<float>(q[i] - gq.zero_point), dtype);
    out[i] = RoundToDType(shifted * gq.scale, dtype);
  }
}

Status QuantizeRowsRtn(const QuantParams& p, DType dtype, const uint8_t* weight, int64_t rows,
                       int64_t cols, const RowBlockQuantOutput& out) {
  SPK_RETURN_IF_ERROR(CheckShapeAndParams(p, dtype, rows, cols));
  assert(out.packed != nullptr && out.scales != nullptr);
  assert(p.symmetric || out.zero_points != nullptr);
  const int64_t width = GroupWidth(cols, p.group_size);
  const int64_t groups = GroupsPerRow(cols, p.group_size);
  const int64_t words = PackedWords(cols, p.bits);
  const size_t elem = DTypeBytes(dtype);

  std::vector<float> row(static_cast<size_t>(cols));
  std::vector<int8_t> q(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    ConvertToFloat(dtype, weight + static_cast<size_t>(r * cols) * elem, row.data(), row.size());
    for (int64_t c = 0; c < cols; ++c) {
      if (!std::isfinite(row[c])) {
        return Status::InvalidInput(
            "weight row " + std::to_string(r) + " column " + std::to_string(c) + " is " +
            (std::isnan(row[c]) ? "NaN" : "Inf") +
            "; only finite weights can be quantized (check the source checkpoint)");
      }
    }
    for (int64_t j = 0; j < groups; ++j) {
      const std::span<const float> group(row.data() + j * width, static_cast<size_t>(width));
      const GroupQuantParams gq = ComputeGroupScale(p, dtype, GroupMinMax(group));
      if (!std::isfinite(gq.scale)) {
        return Status::InvalidInput(
            "weight row " + std::to_string(r) + " columns " + std::to_string(j * width) + ".." +
            std::to_string(j * width + width - 1) + ": the value range overflows " +
            std::string(DTypeName(dtype)) + ", so its scale would be Inf; keep this layer dense");
      }
      QuantizeGroupWithScale(p, dtype, group, gq, std::span(q).subspan(j * width, width));
      const size_t slot = static_cast<size_t>(r * groups + j);
      ConvertFromFloat(dtype, &gq.scale, out.scales + slot * elem, 1);
      if (out.zero_points != nullptr) out.zero_points[slot] = gq.zero_point;
    }
    PackRow(p.bits, q, std::span(out.packed + r * words, static_cast<size_t>(words)));
  }
  return Status::Ok();
}

Status DequantizeRows(const QuantParams& p, DType dtype, const int32_t* packed,
                      const uint8_t* scales, const int32_t* zero_points, int64_t rows, int64_t cols,
                      uint8_t* out) {
  SPK_RETURN_IF_ERROR(CheckShapeAndParams(p, dtype, rows, cols));
  const int64_t width = GroupWidth(cols, p.group_size);
  const int64_t groups = GroupsPerRow(cols, p.group_size);
  const int64_t words = PackedWords(cols, p.bits);
  const size_t elem = DTypeBytes(dtype);

  std::vector<int8_t> q(static_cast<size_t>(cols));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    UnpackRow(p.bits, std::span(packed + r * words, static_cast<size_t>(words)), q);
    for (int64_t j = 0; j < groups; ++j) {
      const size_t slot = static_cast<size_t>(r * groups + j);
      GroupQuantParams gq;
      ConvertToFloat(dtype, scales + slot * elem, &gq.scale, 1);
      gq.zero_point = zero_points != nullptr ? zero_points[slot] : 0;
      if (gq.zero_point < QMin(p.bits) || gq.zero_point > QMax(p.bits)) {
        return Status::InvalidInput("zero point " + std::to_string(gq.zero_point) + " of row " +
                                    std::to_string(r) + " group " + std::to_string(j) +
                                    " is outside the " + std::to_string(p.bits) + "-bit range");
      }
      DequantizeGroup(dtype, std::span(q).subspan(j * width, width), gq,
                      std::span(row).subspan(j * width, width));
    }
    ConvertFromFloat(dtype, row.data(), out + static_cast<size_t>(r * cols) * elem, row.size());
  }
  return Status::Ok();
}

void PackRow(int bits, std::span<const int8_t> q, std::span<int32_t> words) {
  assert(static_cast<int64_t>(words.size()) == PackedWords(q.size(), bits));
  PackValues(
      bits, q.size(), [&](int64_t k) { return int32_t{q[k]}; },
      [&](int64_t w) -> int32_t& { return words[w]; });
}

void UnpackRow(int bits, std::span<const int32_t> words, std::span<int8_t> q) {
  assert(static_cast<int64_t>(words.size()) == PackedWords(q.size(), bits));
  UnpackValues(
      bits, q.size(), [&](int64_t w) -> const int32_t& { return words[w]; },
      [&](int64_t k, int32_t value) { q[k] = static_cast<int8_t>(value); });
}

void PackZeroPoints(int bits, const int32_t* zero_points, int64_t rows, int64_t groups,
                    int32_t* packed_out) {
  // Each column j is one bit stream down the rows; packed word n of column j is at [n][j].
  for (int64_t j = 0; j < groups; ++j) {
    PackValues(
        bits, rows, [&](int64_t n) { return zero_points[n * groups + j]; },
        [&](int64_t w) -> int32_t& { return packed_out[w * groups + j]; });
  }
}

void UnpackZeroPoints(int bits, const int32_t* packed, int64_t rows, int64_t groups,
                      int32_t* zero_points_out) {
  for (int64_t j = 0; j < groups; ++j) {
    UnpackValues(
        bits, rows, [&](int64_t w) -> const int32_t& { return packed[w * groups + j]; },
        [&](int64_t n, int32_t value) { zero_points_out[n * groups + j] = value; });
  }
}

}  // namespace spk
