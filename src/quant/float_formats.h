// The small float formats of compressed-tensors' float schemes, as scalar reference functions:
// FP8 E4M3 (FP8_DYNAMIC, FP8_BLOCK, the NVFP4 group scales), FP4 E2M1 nibbles (NVFP4, MXFP4), the
// E8M0 exponents of the MX group scales, and NVFP4's per-tensor global scale. Each copies the
// reference's arithmetic (compressed-tensors 0.19: quantization/utils/helpers.py calculate_qparams
// and generate_gparam, utils/mxfp_utils.py, utils/fp4_utils.py cast_to_fp4 on CPU,
// compressors/nvfp4/helpers.py pack_fp4_to_uint8) step for step, with torch's rounding: a step in
// a 16-bit dtype is computed in float32 and rounded to it (tensor/float_convert.h RoundToDType).
//
// This is kernel vocabulary (below quant/scheme.h): it knows no scheme or checkpoint. Pure
// functions over values: thread-safe. No errors: the callers reject non-finite input first.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace spk {

// The largest finite FP8 E4M3 (e4m3fn) value, torch.finfo(torch.float8_e4m3fn).max.
inline constexpr float kFp8E4M3Max = 448.0f;
// The largest FP4 E2M1 value.
inline constexpr float kFp4E2M1Max = 6.0f;
// torch.finfo(float8_e4m3fn).eps: the NVFP4 group scale that replaces a zero scale.
inline constexpr float kFp8E4M3Eps = 0.125f;

// float32 -> E4M3 (e4m3fn) bits, round to nearest even with subnormals (2^-9 steps below 2^-6),
// as torch's `.to(torch.float8_e4m3fn)` for a value torch has clamped to +-448 first. Values past
// 448 saturate to +-448 (the reference clamps before casting, so this never decides a result);
// NaN becomes 0x7F. The sign of zero is kept (-0.0 -> 0x80).
uint8_t FloatToE4M3(float x);
// E4M3 bits -> float32 (exact); 0x7F/0xFF are NaN.
float E4M3ToFloat(uint8_t bits);

// The E2M1 nibble compressed-tensors stores for x (cast_to_fp4 then pack_fp4_to_uint8, CPU path):
// |x| rounds to {0, 0.5, 1, 1.5, 2, 3, 4, 6} with ties to the even mantissa (0.25 -> 0, 0.75 -> 1,
// 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4, above 5 -> 6); bit 3 is the sign of
// sign(x) * rounded, so a negative x that rounds to 0 is stored as -0 (0x8) and -0.0 itself as 0.
uint8_t FloatToE2M1(float x);
// E2M1 nibble (low 4 bits) -> float32 (compressed-tensors' kE2M1ToFloat, with the sign).
float E2M1ToFloat(uint8_t nibble);

// The E8M0 exponent of an MX group scale (MXFP4: element_bits 4, MXFP8: 8) for a group whose
// absolute maximum is `absmax` (a value of `dtype`): generate_mx_scales (round_to_power_2 on the
// dtype's bits, rounding the mantissa up from 0.75, then 127 + log2 - floor(log2(element max)))
// clamped to 0..255 as round_to_quantized_type_dtype(uint8) does.
uint8_t MxScaleExponent(float absmax, DType dtype, int element_bits);
// The scale an MX exponent stands for in `dtype`: 2^(e - 127) rounded to the dtype, and 1 where
// that underflows to 0 (the reference's eps for an integer scale dtype).
float MxScaleValue(uint8_t exponent, DType dtype);
// The E8M0 byte compressed-tensors stores for a scale value (compress_mx_scale:
// 127 + floor(log2(scale))). REQUIRES: scale a positive finite power of two.
uint8_t MxStoredExponent(float scale);
// The BF16 scale compressed-tensors decompresses a stored E8M0 byte to (2 ** (e - 127) in BF16),
// as float32.
float MxDecompressedScale(uint8_t exponent);

// The largest |w| of n little-endian values of `dtype` (BF16, F16, F32); NaN values are skipped
// (the quantizer rejects them by name afterwards).
float AbsMaxOf(DType dtype, const uint8_t* values, size_t n);

// NVFP4's weight_global_scale for weights whose absolute maximum is `absmax` (a value of `dtype`):
// generate_gparam, R(R(1 / max(absmax, tiny)) * 2688) in the dtype (torch's scalar / tensor is
// a reciprocal and a product), 1 where that overflows, as float32.
float NvFp4GlobalScale(float absmax, DType dtype);

}  // namespace spk
