// Compiles float_simd-inl.h once per CPU target (hwy/foreach_target.h re-includes this file) and
// dispatches to the best target the CPU supports at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quant/simd/float_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "quant/simd/float_simd-inl.h"

#if HWY_ONCE
#include <cassert>
#include <cmath>

#include "quant/simd/float_simd.h"

namespace spk {

HWY_EXPORT(ByteRowsKernel);
HWY_EXPORT(AbsMaxKernel);
HWY_EXPORT(E4M3CodesKernel);
HWY_EXPORT(E2M1CodesKernel);
HWY_EXPORT(MxScalesKernel);
HWY_EXPORT(NvDivisorsKernel);
HWY_EXPORT(FloatTargetNameKernel);

Status QuantizeByteRowsFast(const ByteRowsLayout& layout, const QuantParams& p, DType dtype,
                            const uint8_t* weight, int64_t rows, int64_t cols, float global_scale,
                            const ByteRowsOutput& out) {
  assert(IsQuantizableFloat(dtype) && out.values != nullptr && out.scales != nullptr);
  // The kernels' NVFP4 clamp assumes a finite positive global scale (the pipeline's always is).
  const bool gs_ok = std::isfinite(global_scale) && global_scale > 0.0f;
  if ((layout.format != ByteFormat::kNvfp4 || gs_ok) &&
      HWY_DYNAMIC_DISPATCH(ByteRowsKernel)(layout, p, dtype, weight, rows, cols, global_scale,
                                           out)) {
    return Status::Ok();
  }
  // Non-finite data or an overflowing MX scale: the reference names the row and column.
  return QuantizeByteRows(layout, p, dtype, weight, rows, cols, global_scale, out);
}

namespace simd {

float AbsMaxOf(DType dtype, const uint8_t* values, size_t n) {
  assert(IsQuantizableFloat(dtype));
  return HWY_DYNAMIC_DISPATCH(AbsMaxKernel)(dtype, values, n);
}

void FloatsToE4M3(const float* x, size_t n, uint8_t* out) {
  HWY_DYNAMIC_DISPATCH(E4M3CodesKernel)(x, n, out);
}

void FloatsToE2M1(const float* x, size_t n, uint8_t* out) {
  HWY_DYNAMIC_DISPATCH(E2M1CodesKernel)(x, n, out);
}

bool MxScales(DType dtype, int element_bits, const float* absmax, size_t n, float* scales,
              uint8_t* stored) {
  assert(IsQuantizableFloat(dtype) && (element_bits == 4 || element_bits == 8));
  return HWY_DYNAMIC_DISPATCH(MxScalesKernel)(dtype, element_bits, absmax, n, scales, stored);
}

void NvGroupDivisors(DType dtype, float global_scale, const float* absmax, size_t n,
                     float* divisors, uint8_t* stored) {
  assert(IsQuantizableFloat(dtype) && std::isfinite(global_scale) && global_scale > 0.0f);
  HWY_DYNAMIC_DISPATCH(NvDivisorsKernel)(dtype, global_scale, absmax, n, divisors, stored);
}

const char* FloatActiveTargetName() { return HWY_DYNAMIC_DISPATCH(FloatTargetNameKernel)(); }

}  // namespace simd
}  // namespace spk
#endif  // HWY_ONCE
