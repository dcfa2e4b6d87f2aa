#include "quant/fp4_packed.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "quant/float_formats.h"
#include "quant/pack_quantized.h"
#include "tensor/float_convert.h"

namespace spk {
namespace {

constexpr std::array<std::string_view, 3> kSuffixes = {kPackedSuffix, kScaleSuffix,
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
    return std::span(kSuffixes).first(kind_ == Fp4Kind::kNv ? 3 : 2);
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
    const int64_t g = p.group_size, groups = cols / g;
    const size_t elem = DTypeBits(dtype) / 8;
    std::vector<float> row(static_cast<size_t>(cols));
    std::vector<uint8_t> nibbles(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      ConvertToFloat(dtype, weight + static_cast<size_t>(r * cols) * elem, row.data(), row.size());
      SPK_RETURN_IF_ERROR(RequireFiniteRow(row, r));
      for (int64_t j = 0; j < groups; ++j) {
        const std::span<const float> w(row.data() + j * g, static_cast<size_t>(g));
        float absmax = 0.0f;
        for (float v : w) absmax = std::max(absmax, std::fabs(v));
        uint8_t* scale = out[TensorRole::kScale] + r * groups + j;
        Status s = kind_ == Fp4Kind::kNv
                       ? QuantizeNvGroup(dtype, w, absmax, global_scale, scale, &nibbles[j * g])
                       : QuantizeMxGroup(dtype, w, absmax, scale, &nibbles[j * g]);
        if (!s.ok()) {
          return Status::InvalidInput(fmt::format("weight row {} columns {}..{}: {}", r, j * g,
                                                  j * g + g - 1, s.message()));
        }
      }
      uint8_t* packed = out[TensorRole::kPacked] + r * (cols / 2);
      for (int64_t c = 0; c < cols; c += 2) {
        packed[c / 2] = static_cast<uint8_t>(nibbles[c] | (nibbles[c + 1] << 4));
      }
    }
    return Status::Ok();
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
  // NVFP4: calculate_qparams with the global scale, then _quantize in float32.
  static Status QuantizeNvGroup(DType dtype, std::span<const float> w, float absmax,
                                float global_scale, uint8_t* scale_out, uint8_t* nibbles) {
    const float local = RoundToDType(absmax / RoundToDType(kFp4E2M1Max, dtype), dtype);
    const float scaled = std::clamp(global_scale * local, -kFp8E4M3Max, kFp8E4M3Max);
    float scale = E4M3ToFloat(FloatToE4M3(scaled));
    if (scale == 0.0f) scale = kFp8E4M3Eps;
    *scale_out = FloatToE4M3(scale);
    const float effective = scale / global_scale;
    for (size_t i = 0; i < w.size(); ++i) nibbles[i] = FloatToE2M1(w[i] / effective);
    return Status::Ok();
  }

  // MXFP4: the E8M0 exponent of the group max, the scale in the weight dtype, then _quantize in
  // the weight dtype.
  static Status QuantizeMxGroup(DType dtype, std::span<const float> w, float absmax,
                                uint8_t* scale_out, uint8_t* nibbles) {
    const float scale = MxScaleValue(MxScaleExponent(absmax, dtype, 4), dtype);
    if (!std::isfinite(scale)) {
      return Status::InvalidInput(fmt::format(
          "the group maximum {} gives an MX scale that overflows {}; keep this layer dense", absmax,
          DTypeName(dtype)));
    }
    *scale_out = MxStoredExponent(scale);
    for (size_t i = 0; i < w.size(); ++i)
      nibbles[i] = FloatToE2M1(RoundToDType(w[i] / scale, dtype));
    return Status::Ok();
  }

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
