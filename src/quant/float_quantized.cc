#include "quant/float_quantized.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "quant/float_formats.h"
#include "quant/pack_quantized.h"
#include "quant/rtn.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

constexpr std::array<std::string_view, 2> kSuffixes = {kWeightSuffix, kScaleSuffix};

enum class ValueKind { kE4M3, kInt8 };
enum class ScaleKind { kLikeWeight, kE8M0 };

// What distinguishes the unpacked formats.
struct NaiveLayout {
  std::string_view format;
  ValueKind value;
  ScaleKind scale;
  int64_t block_rows;  // 128 for FP8_BLOCK: a scale covers this many rows; 1 otherwise
};

size_t Bytes(DType dtype) { return DTypeBits(dtype) / 8; }

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

class NaiveQuantized final : public WeightCodec {
 public:
  explicit constexpr NaiveQuantized(NaiveLayout layout) : l_(layout) {}

  std::string_view format() const override { return l_.format; }
  std::span<const std::string_view> suffixes() const override { return kSuffixes; }
  int64_t RowAlignment() const override { return l_.block_rows; }
  DType DequantizedDType(DType weight_dtype) const override { return ScaleMathDType(weight_dtype); }

  Status Validate(const QuantParams& p, DType weight_dtype, int64_t rows,
                  int64_t cols) const override {
    // Blocks may be partial; groups (MX) must divide the row, as compressed-tensors requires.
    return ValidateWeight(p, weight_dtype, rows, cols, l_.block_rows > 1);
  }

  std::vector<StoredTensor> Tensors(const QuantParams& p, DType weight_dtype, int64_t rows,
                                    int64_t cols) const override {
    const DType value = l_.value == ValueKind::kE4M3 ? DType::kF8E4M3 : DType::kI8;
    return {
        {kWeightSuffix, TensorRole::kPacked, value, {rows, cols}},
        {kScaleSuffix,
         TensorRole::kScale,
         ScaleDType(weight_dtype),
         {CeilDiv(rows, l_.block_rows), Groups(p, cols)},
         l_.block_rows},
    };
  }

  Status QuantizeRows(const QuantParams& p, QuantMethod /*method*/, DType dtype,
                      const uint8_t* weight, int64_t rows, int64_t cols, float /*global_scale*/,
                      const RowBlockBytes& out) const override {
    SPK_RETURN_IF_ERROR(Validate(p, dtype, rows, cols));
    const int64_t width = Width(p, cols), groups = Groups(p, cols);
    const size_t elem = Bytes(dtype), scale_bytes = Bytes(ScaleDType(dtype));
    std::vector<float> band(static_cast<size_t>(std::min(rows, l_.block_rows) * cols));
    std::vector<float> scales(static_cast<size_t>(groups));
    for (int64_t r0 = 0; r0 < rows; r0 += l_.block_rows) {
      const int64_t n = std::min(l_.block_rows, rows - r0);
      ConvertToFloat(dtype, weight + static_cast<size_t>(r0 * cols) * elem, band.data(),
                     static_cast<size_t>(n * cols));
      for (int64_t r = 0; r < n; ++r) {
        SPK_RETURN_IF_ERROR(RequireFiniteRow(std::span(band).subspan(r * cols, cols), r0 + r));
      }
      uint8_t* scale_row = out[TensorRole::kScale] + (r0 / l_.block_rows) * groups * scale_bytes;
      for (int64_t j = 0; j < groups; ++j) {
        const int64_t c0 = j * width, c1 = std::min(cols, c0 + width);
        scales[j] =
            GroupScale(p, dtype, BandRange(band, n, cols, c0, c1), scale_row + j * scale_bytes);
      }
      uint8_t* values = out[TensorRole::kPacked] + r0 * cols;
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t j = 0; j < groups; ++j) {
          const int64_t c0 = j * width, c1 = std::min(cols, c0 + width);
          QuantizeSpan(p, dtype, std::span(band).subspan(r * cols + c0, c1 - c0), scales[j],
                       values + r * cols + c0);
        }
      }
    }
    return Status::Ok();
  }

  Status DequantizeRows(const QuantParams& p, DType dtype, const RowBlockBytes& in,
                        float /*global_scale*/, int64_t rows, int64_t cols,
                        uint8_t* out) const override {
    SPK_RETURN_IF_ERROR(Validate(p, dtype, rows, cols));
    const int64_t width = Width(p, cols), groups = Groups(p, cols);
    const size_t scale_bytes = Bytes(ScaleDType(dtype));
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* scale_row =
          in[TensorRole::kScale] + (r / l_.block_rows) * groups * scale_bytes;
      const uint8_t* values = in[TensorRole::kPacked] + r * cols;
      for (int64_t c = 0; c < cols; ++c) {
        const float scale = StoredScale(dtype, scale_row + (c / width) * scale_bytes);
        const float v = l_.value == ValueKind::kE4M3 ? E4M3ToFloat(values[c])
                                                     : static_cast<float>(int8_t(values[c]));
        // The reference multiplies in the scale's dtype: values.to(scale.dtype) * scale.
        row[c] =
            RoundToDType(RoundToDType(v, ScaleMathDType(dtype)) * scale, ScaleMathDType(dtype));
      }
      const DType out_dtype = DequantizedDType(dtype);
      ConvertFromFloat(out_dtype, row.data(),
                       out + static_cast<size_t>(r * cols) * Bytes(out_dtype), row.size());
    }
    return Status::Ok();
  }

 private:
  DType ScaleDType(DType weight_dtype) const {
    return l_.scale == ScaleKind::kE8M0 ? DType::kU8 : weight_dtype;
  }
  // The dtype the decompressor multiplies in: the scale's (BF16 for decompressed E8M0 scales).
  DType ScaleMathDType(DType weight_dtype) const {
    return l_.scale == ScaleKind::kE8M0 ? DType::kBF16 : weight_dtype;
  }
  int64_t Width(const QuantParams& p, int64_t cols) const {
    return p.group_size == kChannelWise ? cols : p.group_size;
  }
  int64_t Groups(const QuantParams& p, int64_t cols) const { return CeilDiv(cols, Width(p, cols)); }

  // Min and max of columns [c0, c1) of the band's n rows.
  static GroupRange BandRange(const std::vector<float>& band, int64_t n, int64_t cols, int64_t c0,
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

  // The scale of a group (as float, for quantizing) and its stored bytes at `stored`.
  float GroupScale(const QuantParams& p, DType dtype, GroupRange range, uint8_t* stored) const {
    float scale;
    if (l_.value == ValueKind::kInt8) {
      scale = ComputeGroupScale(p, dtype, range).scale;
    } else {
      // calculate_qparams: 0 is always in range; absmax / (bit_range / 2) in the weight dtype.
      const float absmax = std::max({-range.min, range.max, 0.0f});
      if (l_.scale == ScaleKind::kE8M0) {
        scale = MxScaleValue(MxScaleExponent(absmax, dtype, 8), dtype);
        *stored = MxStoredExponent(scale);
        return scale;
      }
      scale = RoundToDType(absmax / kFp8E4M3Max, dtype);
      if (scale == 0.0f) scale = DTypeEps(dtype);
    }
    ConvertFromFloat(dtype, &scale, stored, 1);
    return scale;
  }

  // The stored values of one group: cast(clamp(R(w / scale), qmin, qmax)).
  void QuantizeSpan(const QuantParams& p, DType dtype, std::span<const float> w, float scale,
                    uint8_t* out) const {
    if (l_.value == ValueKind::kInt8) {
      QuantizeGroupWithScale(p, dtype, w, {scale, 0},
                             std::span(reinterpret_cast<int8_t*>(out), w.size()));
      return;
    }
    for (size_t i = 0; i < w.size(); ++i) {
      const float x = std::clamp(RoundToDType(w[i] / scale, dtype), -kFp8E4M3Max, kFp8E4M3Max);
      out[i] = FloatToE4M3(x);
    }
  }

  float StoredScale(DType dtype, const uint8_t* stored) const {
    if (l_.scale == ScaleKind::kE8M0) return MxDecompressedScale(*stored);
    float scale;
    ConvertToFloat(dtype, stored, &scale, 1);
    return scale;
  }

  NaiveLayout l_;
};

}  // namespace

const WeightCodec& Fp8ChannelCodec() {
  static const NaiveQuantized codec(
      {"float-quantized", ValueKind::kE4M3, ScaleKind::kLikeWeight, 1});
  return codec;
}

const WeightCodec& Fp8BlockCodec() {
  static const NaiveQuantized codec(
      {"float-quantized", ValueKind::kE4M3, ScaleKind::kLikeWeight, 128});
  return codec;
}

const WeightCodec& IntQuantizedCodec() {
  static const NaiveQuantized codec({"int-quantized", ValueKind::kInt8, ScaleKind::kLikeWeight, 1});
  return codec;
}

const WeightCodec& Mxfp8Codec() {
  static const NaiveQuantized codec({"mxfp8-quantized", ValueKind::kE4M3, ScaleKind::kE8M0, 1});
  return codec;
}

}  // namespace spk
