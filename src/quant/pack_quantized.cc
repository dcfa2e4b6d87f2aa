#include "quant/pack_quantized.h"

#include <fmt/format.h>

#include <array>

#include "quant/simd/rtn_simd.h"
#include "quant/simd/search_simd.h"

namespace spk {
namespace {

constexpr std::array<std::string_view, 4> kPackQuantizedSuffixes = {kPackedSuffix, kScaleSuffix,
                                                                    kShapeSuffix, kZeroPointSuffix};

class PackQuantized final : public WeightCodec {
 public:
  std::string_view format() const override { return "pack-quantized"; }
  std::span<const std::string_view> suffixes() const override { return kPackQuantizedSuffixes; }

  Status Validate(const QuantParams& p, DType weight_dtype, int64_t rows,
                  int64_t cols) const override {
    return ValidateWeight(p, weight_dtype, rows, cols, false);
  }

  std::vector<StoredTensor> Tensors(const QuantParams& p, DType weight_dtype, int64_t rows,
                                    int64_t cols) const override {
    std::vector<StoredTensor> out = {
        {kPackedSuffix, TensorRole::kPacked, DType::kI32, PackedShape(rows, cols, p.bits)},
        {kScaleSuffix, TensorRole::kScale, weight_dtype, ScaleShape(rows, cols, p.group_size)},
        {kShapeSuffix, TensorRole::kShape, DType::kI64, {2}, 0},
    };
    if (!p.symmetric) {
      out.push_back({kZeroPointSuffix, TensorRole::kZeroPoint, DType::kI32,
                     ZeroPointShape(rows, cols, p.bits, p.group_size), 0});
    }
    return out;
  }

  bool SupportsSearch() const override { return true; }

  Status QuantizeRows(const QuantParams& p, QuantMethod method, DType dtype, const uint8_t* weight,
                      int64_t rows, int64_t cols, float /*global_scale*/,
                      const RowBlockBytes& out) const override {
    const RowBlockQuantOutput q = IntOutput(out);
    return method == QuantMethod::kSearch ? QuantizeRowsSearchFast(p, dtype, weight, rows, cols, q)
                                          : QuantizeRowsRtnFast(p, dtype, weight, rows, cols, q);
  }

  Status DequantizeRows(const QuantParams& p, DType dtype, const RowBlockBytes& in,
                        float /*global_scale*/, int64_t rows, int64_t cols,
                        uint8_t* out) const override {
    const RowBlockQuantOutput q = IntOutput(in);
    return spk::DequantizeRows(p, dtype, q.packed, q.scales, q.zero_points, rows, cols, out);
  }

 private:
  // The int kernels' view of the block: int32 words, scale bytes, unpacked int32 zero points.
  static RowBlockQuantOutput IntOutput(const RowBlockBytes& b) {
    return {reinterpret_cast<int32_t*>(b[TensorRole::kPacked]), b[TensorRole::kScale],
            reinterpret_cast<int32_t*>(b[TensorRole::kZeroPoint])};
  }
};

}  // namespace

const WeightCodec& PackQuantizedCodec() {
  static const PackQuantized codec;
  return codec;
}

}  // namespace spk
