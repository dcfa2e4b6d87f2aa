// The codec of compressed-tensors' `pack-quantized` format (docs/formats.md section 2): integer
// weights of 1..8 bits packed into int32 words, a scale per group in the weight's dtype, the
// original shape, and for asymmetric schemes zero points packed along the output dimension.
// Quantizes with the Highway kernels of quant/simd/ (bit-exact with the scalar reference in
// quant/rtn.h) and dequantizes as compressed-tensors' PackedQuantizationCompressor.decompress.
//
// Stateless singleton; thread-safe. Errors as quant/codec.h.
#pragma once

#include "quant/codec.h"
#include "quant/stored_names.h"

namespace spk {

const WeightCodec& PackQuantizedCodec();

}  // namespace spk
