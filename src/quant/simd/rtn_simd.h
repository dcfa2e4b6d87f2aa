// The fast RTN quantizer: Highway SIMD kernels (rtn_simd-inl.h, compiled once per CPU target and
// picked at run time with HWY_DYNAMIC_DISPATCH) that produce exactly the bytes of the scalar
// reference in quant/rtn.h: the same packed words, scales and zero points, bit for bit, for
// BF16/F16/F32 weights, 2..8 bits, symmetric and asymmetric, every group size. The scale and
// quantize kernels are width-generic; 4 and 8 bits have SIMD packers, the other widths (values
// straddling int32 words) a scalar bit-stream packer (a 64-bit accumulator).
//
// How bit-exactness is kept: every step is the reference's step on a vector of lanes, in the same
// order, with IEEE division (never a reciprocal approximation) and the dtype rounding done in
// integer arithmetic on the float bits (round to nearest even, subnormals kept: the project never
// enables flush-to-zero or fast-math). Bad data (NaN/Inf weights, a scale that overflows the dtype)
// is detected by the kernel, which then hands the block to the scalar reference so that the error
// Status (code and message) is the reference's own.
//
// The individual kernels are public so that the tests can compare each with its scalar
// counterpart on every compiled target and the microbenchmarks (bench/) can time them.
//
// Buffers are caller-owned; nothing is retained; no global state besides Highway's chosen-target
// cache. All functions are thread-safe for distinct outputs. Errors as quant/rtn.h; undersized
// buffers are caller bugs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/status.h"
#include "quant/params.h"
#include "quant/rtn.h"
#include "tensor/dtype.h"

namespace spk {

// A drop-in replacement for QuantizeRowsRtn (same contract, same output bytes, same errors).
Status QuantizeRowsRtnFast(const QuantParams& p, DType dtype, const uint8_t* weight, int64_t rows,
                           int64_t cols, const RowBlockQuantOutput& out);

namespace simd {

// The SIMD counterpart of tensor/float_convert.h's ConvertToFloat (BF16, F16, F32 -> float32).
void ConvertToFloat(DType src, const uint8_t* src_bytes, float* out, size_t n);

// As quant/rtn.h's GroupMinMax. REQUIRES: values non-empty, no NaN.
GroupRange GroupMinMax(std::span<const float> values);

// ComputeGroupScale for n groups at once: ranges are given as parallel min/max arrays, results go
// to scales[i] and zero_points[i]. REQUIRES: IsQuantizableFloat(dtype), ValidateParams(p).ok().
void ComputeGroupScales(const QuantParams& p, DType dtype, const float* mins, const float* maxs,
                        size_t n, float* scales, int32_t* zero_points);

// As quant/rtn.h's QuantizeGroupWithScale.
void QuantizeGroupWithScale(const QuantParams& p, DType dtype, std::span<const float> w,
                            GroupQuantParams gq, std::span<int8_t> q);

// The float quotients w[i] / scale the row kernels compute for finite weights of `dtype` (the
// corrected reciprocal where that is exact, else IEEE division), for the test that holds them to
// the division bit for bit. REQUIRES: scale finite and positive, |w[i] / scale| <= 512.
void QuotientOfWeights(DType dtype, float scale, std::span<const float> w, std::span<float> out);

// As quant/rtn.h's PackRow: SIMD for bits 4 and 8, a scalar bit-stream packer for the others.
void PackRow(int bits, std::span<const int8_t> q, std::span<int32_t> words);

// The name of the Highway target the kernels dispatch to now (e.g. "AVX3"), for tests and reports.
const char* ActiveTargetName();

}  // namespace simd
}  // namespace spk
