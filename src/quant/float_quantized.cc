#include "quant/float_quantized.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "quant/float_formats.h"
#include "quant/float_rows.h"
#include "quant/pack_quantized.h"
#include "quant/rtn.h"
#include "quant/simd/float_simd.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

constexpr std::array<std::string_view, 2> kFloatQuantizedSuffixes = {kWeightSuffix, kScaleSuffix};

enum class ValueKind { kE4M3, kInt8 };
enum class ScaleKind { kLikeWeight, kE8M0 };

// What distinguishes the unpacked formats.
struct NaiveLayout {
  std::string_view format;
  ValueKind value;
  ScaleKind scale;
  int64_t block_rows;  // 128 for FP8_BLOCK: a scale covers this many rows; 1 otherwise
  ByteFormat rows;     // the row quantizer (quant/float_rows.h)
};

size_t Bytes(DType dtype) { return DTypeBits(dtype) / 8; }

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

class NaiveQuantized final : public WeightCodec {
 public:
  explicit constexpr NaiveQuantized(NaiveLayout layout) : l_(layout) {}

  std::string_view format() const override { return l_.format; }
  std::span<const std::string_view> suffixes() const override { return kFloatQuantizedSuffixes; }
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
    return QuantizeByteRowsFast({l_.rows, l_.block_rows}, p, dtype, weight, rows, cols, 0.0f,
                                {out[TensorRole::kPacked], out[TensorRole::kScale]});
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
      {"float-quantized", ValueKind::kE4M3, ScaleKind::kLikeWeight, 1, ByteFormat::kFp8});
  return codec;
}

const WeightCodec& Fp8BlockCodec() {
  static const NaiveQuantized codec(
      {"float-quantized", ValueKind::kE4M3, ScaleKind::kLikeWeight, 128, ByteFormat::kFp8});
  return codec;
}

const WeightCodec& IntQuantizedCodec() {
  static const NaiveQuantized codec(
      {"int-quantized", ValueKind::kInt8, ScaleKind::kLikeWeight, 1, ByteFormat::kInt});
  return codec;
}

const WeightCodec& Mxfp8Codec() {
  static const NaiveQuantized codec(
      {"mxfp8-quantized", ValueKind::kE4M3, ScaleKind::kE8M0, 1, ByteFormat::kMxfp8});
  return codec;
}

}  // namespace spk
