#include "quant/pack_quantized.h"

#include <fmt/format.h>

#include <array>

#include "quant/simd/rtn_simd.h"
#include "quant/simd/search_simd.h"

namespace spk {
namespace {

constexpr std::array<std::string_view, 4> kSuffixes = {kPackedSuffix, kScaleSuffix, kShapeSuffix,
                                                       kZeroPointSuffix};

class PackQuantized final : public WeightCodec {
 public:
  std::string_view format() const override { return "pack-quantized"; }
  std::span<const std::string_view> suffixes() const override { return kSuffixes; }

  Status Validate(const QuantParams& p, DType weight_dtype, int64_t rows,
                  int64_t cols) const override {
    SPK_RETURN_IF_ERROR(ValidateParams(p));
    if (!IsQuantizableFloat(weight_dtype)) {
      return Status::InvalidInput(fmt::format(
          "weight dtype {} cannot be quantized (BF16, F16 or F32 only)", DTypeName(weight_dtype)));
    }
    if (rows <= 0 || !GroupFits(cols, p.group_size)) {
      return Status::InvalidInput(fmt::format(
          "a [{}, {}] weight cannot be stored with group size {}: the columns must be a positive "
          "multiple of it",
          rows, cols, p.group_size));
    }
    return Status::Ok();
  }

  std::vector<StoredTensor> Tensors(const QuantParams& p, DType weight_dtype, int64_t rows,
                                    int64_t cols) const override {
    std::vector<StoredTensor> out = {
        {kPackedSuffix, TensorRole::kPacked, DType::kI32, PackedShape(rows, cols, p.bits)},
        {kScaleSuffix, TensorRole::kScale, weight_dtype, ScaleShape(rows, cols, p.group_size)},
        {kShapeSuffix, TensorRole::kShape, DType::kI64, {2}},
    };
    if (!p.symmetric) {
      out.push_back({kZeroPointSuffix, TensorRole::kZeroPoint, DType::kI32,
                     ZeroPointShape(rows, cols, p.bits, p.group_size)});
    }
    return out;
  }

  Status QuantizeRows(const QuantParams& p, QuantMethod method, DType dtype, const uint8_t* weight,
                      int64_t rows, int64_t cols, const RowBlockQuantOutput& out) const override {
    return method == QuantMethod::kSearch
               ? QuantizeRowsSearchFast(p, dtype, weight, rows, cols, out)
               : QuantizeRowsRtnFast(p, dtype, weight, rows, cols, out);
  }

  Status DequantizeRows(const QuantParams& p, DType dtype, const int32_t* packed,
                        const uint8_t* scales, const int32_t* zero_points, int64_t rows,
                        int64_t cols, uint8_t* out) const override {
    return spk::DequantizeRows(p, dtype, packed, scales, zero_points, rows, cols, out);
  }
};

}  // namespace

const WeightCodec& PackQuantizedCodec() {
  static const PackQuantized codec;
  return codec;
}

}  // namespace spk
