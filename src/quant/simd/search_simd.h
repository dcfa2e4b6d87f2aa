// The fast scale search (`--method search`): Highway SIMD kernels (search_simd-inl.h, compiled once
// per CPU target, picked at run time with HWY_DYNAMIC_DISPATCH) that produce exactly the bytes of
// the scalar reference QuantizeRowsSearch (quant/search.h): the same packed words, scales and zero
// points, bit for bit, for any vector width.
//
// How: the search logic (candidates, choices) is the reference's own SearchGroupWith, called with
// SIMD SearchKernels; each kernel applies the reference kernel's operations to lanes, in the
// same order, and its sums keep the reference's 16 stripes and its fixed addition tree (no FMA:
// the sources are compiled with -ffp-contract=off). The search runs inside the RTN row pass: each
// row is converted, RTN-quantized and searched group by group, then packed once, for symmetric and
// asymmetric schemes alike. Bad data (NaN/Inf weights, an
// overflowing scale) is handed to the reference so that the error Status is its own.
//
// Buffers are caller-owned; nothing is retained; no global state besides Highway's chosen-target
// cache. Thread-safe for distinct outputs. Errors as quant/search.h.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "quant/params.h"
#include "quant/rtn.h"
#include "quant/search.h"
#include "tensor/dtype.h"

namespace spk {

// A drop-in replacement for QuantizeRowsSearch (same contract, same output bytes, same errors).
Status QuantizeRowsSearchFast(const QuantParams& p, DType dtype, const uint8_t* weight,
                              int64_t rows, int64_t cols, const RowBlockQuantOutput& out);

namespace simd {

// The SIMD kernels of the target the dispatch picks now (for the tests and benchmarks; they have
// ScalarSearchKernels()' contract and results).
const SearchKernels& ActiveSearchKernels();

// The name of that target (e.g. "AVX3").
const char* ActiveSearchTargetName();

}  // namespace simd
}  // namespace spk
