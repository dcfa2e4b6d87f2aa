// Compiles search_simd-inl.h once per CPU target (hwy/foreach_target.h re-includes this file) and
// dispatches to the best target the CPU supports at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quant/simd/search_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "quant/simd/search_simd-inl.h"

#if HWY_ONCE
#include <cassert>

#include "quant/simd/search_simd.h"

namespace spk {

HWY_EXPORT(SearchRowsKernel);
HWY_EXPORT(SearchKernelsKernel);
HWY_EXPORT(SearchTargetNameKernel);

Status QuantizeRowsSearchFast(const QuantParams& p, DType dtype, const uint8_t* weight,
                              int64_t rows, int64_t cols, const RowBlockQuantOutput& out) {
  // Anything rejected before the data is looked at is rejected by the reference itself.
  if (!IsQuantizableFloat(dtype) || !ValidateParams(p).ok() || rows < 0 ||
      !GroupFits(cols, p.group_size)) {
    return QuantizeRowsSearch(p, dtype, weight, rows, cols, out);
  }
  assert(out.packed != nullptr && out.scales != nullptr);
  assert(p.symmetric || out.zero_points != nullptr);
  if (HWY_DYNAMIC_DISPATCH(SearchRowsKernel)(p, dtype, weight, rows, cols, out)) {
    return Status::Ok();
  }
  // Non-finite data or an overflowing scale: the reference names the row and column.
  Status reference = QuantizeRowsSearch(p, dtype, weight, rows, cols, out);
  assert(!reference.ok());
  return reference;
}

namespace simd {

const SearchKernels& ActiveSearchKernels() { return *HWY_DYNAMIC_DISPATCH(SearchKernelsKernel)(); }

const char* ActiveSearchTargetName() { return HWY_DYNAMIC_DISPATCH(SearchTargetNameKernel)(); }

}  // namespace simd
}  // namespace spk
#endif  // HWY_ONCE
