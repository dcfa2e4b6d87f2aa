// Compiles rtn_simd-inl.h once per CPU target (hwy/foreach_target.h re-includes this file) and
// dispatches to the best target the CPU supports at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quant/simd/rtn_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "quant/simd/rtn_simd-inl.h"

#if HWY_ONCE
#include <cassert>
#include <cmath>

#include "quant/simd/rtn_simd.h"

namespace spk {

HWY_EXPORT(QuantizeRowsKernel);
HWY_EXPORT(ConvertToFloatKernel);
HWY_EXPORT(GroupMinMaxKernel);
HWY_EXPORT(ComputeGroupScalesKernel);
HWY_EXPORT(QuantizeGroupKernel);
HWY_EXPORT(QuotientKernel);
HWY_EXPORT(PackRowKernel);
HWY_EXPORT(TargetNameKernel);

Status QuantizeRowsRtnFast(const QuantParams& p, DType dtype, const uint8_t* weight, int64_t rows,
                           int64_t cols, const RowBlockQuantOutput& out) {
  // Anything the reference rejects before looking at the data (dtype, params, shape) is rejected
  // by the reference itself, so the message is the same.
  if (!IsQuantizableFloat(dtype) || !ValidateParams(p).ok() || rows < 0 ||
      !GroupFits(cols, p.group_size)) {
    return QuantizeRowsRtn(p, dtype, weight, rows, cols, out);
  }
  assert(out.packed != nullptr && out.scales != nullptr);
  assert(p.symmetric || out.zero_points != nullptr);
  if (HWY_DYNAMIC_DISPATCH(QuantizeRowsKernel)(p, dtype, weight, rows, cols, out)) {
    return Status::Ok();
  }
  // Non-finite data or an overflowing scale: the reference names the row and column.
  Status reference = QuantizeRowsRtn(p, dtype, weight, rows, cols, out);
  assert(!reference.ok());
  return reference;
}

namespace simd {

void ConvertToFloat(DType src, const uint8_t* src_bytes, float* out, size_t n) {
  assert(IsQuantizableFloat(src));
  HWY_DYNAMIC_DISPATCH(ConvertToFloatKernel)(src, src_bytes, out, n);
}

GroupRange GroupMinMax(std::span<const float> values) {
  assert(!values.empty());
  return HWY_DYNAMIC_DISPATCH(GroupMinMaxKernel)(values.data(), values.size());
}

void ComputeGroupScales(const QuantParams& p, DType dtype, const float* mins, const float* maxs,
                        size_t n, float* scales, int32_t* zero_points) {
  assert(IsQuantizableFloat(dtype) && ValidateParams(p).ok());
  HWY_DYNAMIC_DISPATCH(ComputeGroupScalesKernel)(p, dtype, mins, maxs, n, scales, zero_points);
}

void QuantizeGroupWithScale(const QuantParams& p, DType dtype, std::span<const float> w,
                            GroupQuantParams gq, std::span<int8_t> q) {
  assert(q.size() == w.size());
  HWY_DYNAMIC_DISPATCH(QuantizeGroupKernel)
  (p, dtype, w.data(), w.size(), gq.scale, gq.zero_point, q.data());
}

void QuotientOfWeights(DType dtype, float scale, std::span<const float> w, std::span<float> out) {
  assert(out.size() == w.size() && scale > 0.0f && std::isfinite(scale));
  HWY_DYNAMIC_DISPATCH(QuotientKernel)(dtype, scale, w.data(), w.size(), out.data());
}

void PackRow(int bits, std::span<const int8_t> q, std::span<int32_t> words) {
  assert(static_cast<int64_t>(words.size()) == PackedWords(q.size(), bits));
  HWY_DYNAMIC_DISPATCH(PackRowKernel)(bits, q.data(), q.size(), words.data());
}

const char* ActiveTargetName() { return HWY_DYNAMIC_DISPATCH(TargetNameKernel)(); }

}  // namespace simd
}  // namespace spk
#endif  // HWY_ONCE
