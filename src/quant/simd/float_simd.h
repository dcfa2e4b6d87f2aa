// The fast quantizer of the byte formats (FP8 E4M3 per channel and per block, INT8/W4AFP8
// int-quantized, MXFP8, NVFP4, MXFP4): Highway SIMD kernels (float_simd-inl.h, compiled once per
// CPU target and picked at run time with HWY_DYNAMIC_DISPATCH) that write exactly the bytes of the
// scalar reference quant/float_rows.h, and the absmax pass of NVFP4's global scale.
//
// How bit-exactness is kept: every step is the reference's on a vector of lanes, in its order,
// with IEEE division (never a reciprocal), the dtype roundings of rtn_simd-inl.h, and the small
// float codes computed on the float bits (E4M3: round to nearest even on the bits, the 2^-9 grid
// below 2^-6, saturation; E2M1: the reference's seven thresholds; E8M0: the exponent field of
// round_to_power_2). Bad data (NaN/Inf weights, an MX scale that overflows the dtype) makes the
// kernel stop; the block is then rerun through the reference, whose Status is returned.
//
// The individual kernels are public so that the tests compare each with its scalar counterpart on
// every compiled target. Buffers are caller-owned; no state besides Highway's chosen-target cache;
// thread-safe for distinct outputs. Errors as quant/float_rows.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "quant/float_rows.h"
#include "quant/params.h"
#include "tensor/dtype.h"

namespace spk {

// A drop-in replacement for QuantizeByteRows (same contract, output bytes and errors).
Status QuantizeByteRowsFast(const ByteRowsLayout& layout, const QuantParams& p, DType dtype,
                            const uint8_t* weight, int64_t rows, int64_t cols, float global_scale,
                            const ByteRowsOutput& out);

namespace simd {

// As quant/float_formats.h's AbsMaxOf (NaN skipped, Inf kept).
float AbsMaxOf(DType dtype, const uint8_t* values, size_t n);

// FloatToE4M3 and FloatToE2M1 of n values.
void FloatsToE4M3(const float* x, size_t n, uint8_t* out);
void FloatsToE2M1(const float* x, size_t n, uint8_t* out);

// The MX scales of n group maxima (non-negative finite values of `dtype`):
// scales[i] = MxScaleValue(MxScaleExponent(absmax[i], dtype, element_bits), dtype) and
// stored[i] = MxStoredExponent(scales[i]). False (outputs partly written) when a scale overflows.
bool MxScales(DType dtype, int element_bits, const float* absmax, size_t n, float* scales,
              uint8_t* stored);

// NvGroupDivisor of n group maxima (non-negative finite values of `dtype`) under a finite positive
// global scale: divisors[i] and the stored E4M3 scales stored[i].
void NvGroupDivisors(DType dtype, float global_scale, const float* absmax, size_t n,
                     float* divisors, uint8_t* stored);

// The name of the Highway target the kernels dispatch to now (e.g. "AVX3").
const char* FloatActiveTargetName();

}  // namespace simd
}  // namespace spk
