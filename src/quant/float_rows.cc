#include "quant/float_rows.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

namespace spk {
namespace {

size_t Bytes(DType dtype) { return DTypeBits(dtype) / 8; }

// Bytes of one stored scale: the weight dtype's, or one for E8M0/E4M3 scales.
size_t ScaleBytes(ByteFormat f, DType dtype) {
  return f == ByteFormat::kFp8 || f == ByteFormat::kInt ? Bytes(dtype) : 1;
}

// Min and max of columns [c0, c1) of the band's n rows.
GroupRange BandRange(const std::vector<float>& band, int64_t n, int64_t cols, int64_t c0,
                     int64_t c1) {
  GroupRange range{band[c0], band[c0]};
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = c0; c < c1; ++c) {
      range.min = std::min(range.min, band[r * cols + c]);
      range.max = std::max(range.max, band[r * cols + c]);
    }
  }
  return range;
}

// The scale of a group (as float, for quantizing) and its stored bytes at `stored`; +Inf when an
// MX scale overflows the dtype (nothing stored then).
float GroupScale(ByteFormat f, const QuantParams& p, DType dtype, GroupRange range,
                 uint8_t* stored) {
  float scale;
  if (f == ByteFormat::kInt) {
    scale = ComputeGroupScale(p, dtype, range).scale;
  } else {
    // calculate_qparams: 0 is always in range; absmax / (bit_range / 2) in the weight dtype.
    const float absmax = std::max({-range.min, range.max, 0.0f});
    if (f == ByteFormat::kMxfp8) {
      scale = MxScaleValue(MxScaleExponent(absmax, dtype, 8), dtype);
      if (std::isfinite(scale)) *stored = MxStoredExponent(scale);
      return scale;
    }
    scale = Fp8Scale(absmax, dtype);
  }
  ConvertFromFloat(dtype, &scale, stored, 1);
  return scale;
}

// The stored values of one group: cast(clamp(R(w / scale), qmin, qmax)).
void QuantizeSpan(ByteFormat f, const QuantParams& p, DType dtype, std::span<const float> w,
                  float scale, uint8_t* out) {
  if (f == ByteFormat::kInt) {
    QuantizeGroupWithScale(p, dtype, w, {scale, 0},
                           std::span(reinterpret_cast<int8_t*>(out), w.size()));
    return;
  }
  for (size_t i = 0; i < w.size(); ++i) out[i] = QuantizeToE4M3(w[i], scale, dtype);
}

// float-quantized, int-quantized and mxfp8-quantized: one value byte per weight; the scales of a
// band of block_rows rows see every row of the band.
Status QuantizeUnpackedRows(const ByteRowsLayout& l, const QuantParams& p, DType dtype,
                            const uint8_t* weight, int64_t rows, int64_t cols,
                            const ByteRowsOutput& out) {
  const int64_t width = ByteGroupWidth(p, cols), groups = ByteGroups(p, cols);
  const size_t elem = Bytes(dtype), scale_bytes = ScaleBytes(l.format, dtype);
  std::vector<float> band(static_cast<size_t>(std::min(rows, l.block_rows) * cols));
  std::vector<float> scales(static_cast<size_t>(groups));
  for (int64_t r0 = 0; r0 < rows; r0 += l.block_rows) {
    const int64_t n = std::min(l.block_rows, rows - r0);
    ConvertToFloat(dtype, weight + static_cast<size_t>(r0 * cols) * elem, band.data(),
                   static_cast<size_t>(n * cols));
    for (int64_t r = 0; r < n; ++r) {
      SPK_RETURN_IF_ERROR(RequireFiniteRow(std::span(band).subspan(r * cols, cols), r0 + r));
    }
    uint8_t* scale_row = out.scales + (r0 / l.block_rows) * groups * scale_bytes;
    for (int64_t j = 0; j < groups; ++j) {
      const int64_t c0 = j * width, c1 = std::min(cols, c0 + width);
      const GroupRange range = BandRange(band, n, cols, c0, c1);
      scales[j] = GroupScale(l.format, p, dtype, range, scale_row + j * scale_bytes);
      if (!std::isfinite(scales[j])) {
        return MxScaleOverflow(r0, c0, c1 - c0, std::max(-range.min, range.max), dtype);
      }
    }
    uint8_t* values = out.values + r0 * cols;
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t j = 0; j < groups; ++j) {
        const int64_t c0 = j * width, c1 = std::min(cols, c0 + width);
        QuantizeSpan(l.format, p, dtype, std::span(band).subspan(r * cols + c0, c1 - c0), scales[j],
                     values + r * cols + c0);
      }
    }
  }
  return Status::Ok();
}

// nvfp4- and mxfp4-pack-quantized: E2M1 nibbles, two per byte.
Status QuantizeFp4Rows(ByteFormat f, const QuantParams& p, DType dtype, const uint8_t* weight,
                       int64_t rows, int64_t cols, float global_scale, const ByteRowsOutput& out) {
  const int64_t g = p.group_size, groups = cols / g;
  const size_t elem = Bytes(dtype);
  std::vector<float> row(static_cast<size_t>(cols));
  std::vector<uint8_t> nibbles(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    ConvertToFloat(dtype, weight + static_cast<size_t>(r * cols) * elem, row.data(), row.size());
    SPK_RETURN_IF_ERROR(RequireFiniteRow(row, r));
    for (int64_t j = 0; j < groups; ++j) {
      const float* w = row.data() + j * g;
      uint8_t* q = nibbles.data() + j * g;
      float absmax = 0.0f;
      for (int64_t i = 0; i < g; ++i) absmax = std::max(absmax, std::fabs(w[i]));
      uint8_t* scale = out.scales + r * groups + j;
      if (f == ByteFormat::kNvfp4) {
        // _quantize in float32: w / (s / gs).
        const float divisor = NvGroupDivisor(absmax, dtype, global_scale, scale);
        for (int64_t i = 0; i < g; ++i) q[i] = FloatToE2M1(w[i] / divisor);
      } else {
        // The E8M0 exponent of the group max, the scale in the weight dtype, _quantize in it.
        const float s = MxScaleValue(MxScaleExponent(absmax, dtype, 4), dtype);
        if (!std::isfinite(s)) return MxScaleOverflow(r, j * g, g, absmax, dtype);
        *scale = MxStoredExponent(s);
        for (int64_t i = 0; i < g; ++i) q[i] = QuantizeMxToE2M1(w[i], s, dtype);
      }
    }
    uint8_t* packed = out.values + r * (cols / 2);
    for (int64_t c = 0; c < cols; c += 2) {
      packed[c / 2] = static_cast<uint8_t>(nibbles[c] | (nibbles[c + 1] << 4));
    }
  }
  return Status::Ok();
}

}  // namespace

Status QuantizeByteRows(const ByteRowsLayout& layout, const QuantParams& p, DType dtype,
                        const uint8_t* weight, int64_t rows, int64_t cols, float global_scale,
                        const ByteRowsOutput& out) {
  if (IsFp4(layout.format)) {
    return QuantizeFp4Rows(layout.format, p, dtype, weight, rows, cols, global_scale, out);
  }
  return QuantizeUnpackedRows(layout, p, dtype, weight, rows, cols, out);
}

Status RequireFiniteRow(std::span<const float> row, int64_t r) {
  for (size_t c = 0; c < row.size(); ++c) {
    if (!std::isfinite(row[c])) {
      return Status::InvalidInput(fmt::format(
          "weight row {} column {} is {}; only finite weights can be quantized (check the source "
          "checkpoint)",
          r, c, std::isnan(row[c]) ? "NaN" : "Inf"));
    }
  }
  return Status::Ok();
}

Status MxScaleOverflow(int64_t r, int64_t c0, int64_t width, float absmax, DType dtype) {
  return Status::InvalidInput(
      fmt::format("weight row {} columns {}..{}: the group maximum {} gives an MX scale that "
                  "overflows {}; keep "
                  "this layer dense",
                  r, c0, c0 + width - 1, absmax, DTypeName(dtype)));
}

}  // namespace spk
