// The codecs of compressed-tensors' unpacked formats (NaiveQuantizationCompressor and its
// subclasses): the quantized weight is stored as `weight` in a one-byte dtype with the weight's
// shape, beside `weight_scale`.
//   float-quantized (FP8_DYNAMIC, FP8_BLOCK): F8_E4M3 values; scales in the weight's dtype, one per
//     output row ([out, 1]) or per 128 x 128 block ([ceil(out/128), ceil(in/128)], partial blocks
//     allowed; they see only the real weights, as the reference's zero padding does).
//   int-quantized (W8A8 / INT8, W4AFP8): I8 values (int4 ones for W4AFP8), one scale per output row
//     or per group in the weight's dtype.
//   mxfp8-quantized (MXFP8A16): F8_E4M3 values, one U8 E8M0 exponent per group of 32.
// The arithmetic is the reference's (quant/float_formats.h for the small floats; quant/rtn.h's
// ComputeGroupScale and QuantizeGroupWithScale for int8): scale = R(absmax / R(range / 2)) in the
// weight dtype (eps of the dtype for 0), q = cast(clamp(R(w / scale), qmin, qmax)); dequantized
// w' = R(value * scale).
//
// Stateless singletons; thread-safe. Errors as quant/codec.h (NaN/Inf weights name the row and
// column of the block).
#pragma once

#include "quant/codec.h"
#include "quant/stored_names.h"

namespace spk {

const WeightCodec& Fp8ChannelCodec();    // float-quantized, strategy channel
const WeightCodec& Fp8BlockCodec();      // float-quantized, strategy block [128, 128]
const WeightCodec& IntQuantizedCodec();  // int-quantized, strategy channel or group
const WeightCodec& Mxfp8Codec();         // mxfp8-quantized, group 32, E8M0 scales

}  // namespace spk
