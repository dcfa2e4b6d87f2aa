#include "quant/fp4_packed.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "quant/float_formats.h"
#include "quant/float_rows.h"
#include "quant/pack_quantized.h"
#include "quant/simd/float_simd.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

constexpr std::array<std::string_view, 3> kFp4PackedSuffixes = {kPackedSuffix, kScaleSuffix,
                                                                kGlobalScaleSuffix};

// The two flavours: NVFP4 (group 16, E4M3 scales under a global scale) and MXFP4 (group 32, E8M0).
enum class Fp4Kind { kNv, kMx };

class Fp4Packed final : public WeightCodec {
 public:
  explicit constexpr Fp4Packed(Fp4Kind kind) : kind_(kind) {}

  std::string_view format() const override {
    return kind_ == Fp4Kind::kNv ? "nvfp4-pack-quantized" : "mxfp4-pack-quantized";
  }
  std::span<const std::string_view> suffixes() const override {
    return std::span(kFp4PackedSuffixes).first(kind_ == Fp4Kind::kNv ? 3 : 2);
  }
  bool HasGlobalScale() const override { return kind_ == Fp4Kind::kNv; }
  DType DequantizedDType(DType /*weight_dtype*/) const override { return DType::kBF16; }

  Status Validate(const QuantParams& p, DType weight_dtype, int64_t rows,
                  int64_t cols) const override {
    if (p.group_size <= 0) {
      return Status::InvalidInput(
          fmt::format("FP4 formats need a group size, not {}", p.group_size));
    }
    return ValidateWeight(p, weight_dtype, rows, cols, false);
  }

  std::vector<StoredTensor> Tensors(const QuantParams& p, DType /*weight_dtype*/, int64_t rows,
                                    int64_t cols) const override {
    const DType scale = kind_ == Fp4Kind::kNv ? DType::kF8E4M3 : DType::kU8;
    std::vector<StoredTensor> out = {
        {kPackedSuffix, TensorRole::kPacked, DType::kU8, {rows, cols / 2}},
        {kScaleSuffix, TensorRole::kScale, scale, {rows, cols / p.group_size}},
    };
    if (kind_ == Fp4Kind::kNv) {
      out.push_back({kGlobalScaleSuffix, TensorRole::kGlobalScale, DType::kF32, {1}, 0});
    }
    return out;
  }

  Status QuantizeRows(const QuantParams& p, QuantMethod /*method*/, DType dtype,
                      const uint8_t* weight, int64_t rows, int64_t cols, float global_scale,
                      const RowBlockBytes& out) const override {
    SPK_RETURN_IF_ERROR(Validate(p, dtype, rows, cols));
    const ByteFormat format = kind_ == Fp4Kind::kNv ? ByteFormat::kNvfp4 : ByteFormat::kMxfp4;
    return QuantizeByteRowsFast({format}, p, dtype, weight, rows, cols, global_scale,
                                {out[TensorRole::kPacked], out[TensorRole::kScale]});
  }

  Status DequantizeRows(const QuantParams& p, DType dtype, const RowBlockBytes& in,
                        float global_scale, int64_t rows, int64_t cols,
                        uint8_t* out) const override {
    SPK_RETURN_IF_ERROR(Validate(p, dtype, rows, cols));
    const int64_t g = p.group_size, groups = cols / g;
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* packed = in[TensorRole::kPacked] + r * (cols / 2);
      const uint8_t* scales = in[TensorRole::kScale] + r * groups;
      for (int64_t c = 0; c < cols; ++c) {
        const float v = E2M1ToFloat(static_cast<uint8_t>(packed[c / 2] >> (4 * (c % 2))));
        if (kind_ == Fp4Kind::kNv) {
          // scale.to(BF16) / global_scale in float32, times the value in float32, then BF16.
          row[c] = v * (E4M3ToFloat(scales[c / g]) / global_scale);
        } else {
          row[c] = v * MxDecompressedScale(scales[c / g]);  // BF16 times BF16
        }
      }
      ConvertFromFloat(DType::kBF16, row.data(), out + static_cast<size_t>(r * cols) * 2,
                       row.size());
    }
    return Status::Ok();
  }

 private:
  Fp4Kind kind_;
};

}  // namespace

const WeightCodec& Nvfp4Codec() {
  static const Fp4Packed codec(Fp4Kind::kNv);
  return codec;
}

const WeightCodec& Mxfp4Codec() {
  static const Fp4Packed codec(Fp4Kind::kMx);
  return codec;
}

}  // namespace spk
