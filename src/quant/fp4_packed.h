// The codecs of compressed-tensors' packed FP4 formats: E2M1 values, two per byte (the even
// column in the low nibble), in `weight_packed` U8 [out, in/2], beside
//   nvfp4-pack-quantized (NVFP4A16): `weight_scale` F8_E4M3 [out, in/16] and the per-tensor
//     `weight_global_scale` F32 [1], shared by fused q/k/v and gate/up (the caller computes it
//     over the partners with NvFp4GlobalScale and passes it in);
//   mxfp4-pack-quantized (MXFP4A16): `weight_scale` U8 E8M0 exponents [out, in/32].
// The arithmetic is the reference's (quant/float_formats.h): NVFP4 group scale
// s = E4M3(clamp(gs * R(absmax / 6), +-448)) (0.125 for 0), q = E2M1(w / (s / gs)) in float32;
// MXFP4 s = 2^(E8M0 - 127) in the weight dtype, q = E2M1(R(w / s)). Both decompress to BF16 as
// compressed-tensors does, whatever the source dtype.
//
// Stateless singletons; thread-safe. Errors as quant/codec.h.
#pragma once

#include "quant/codec.h"
#include "quant/stored_names.h"

namespace spk {

const WeightCodec& Nvfp4Codec();
const WeightCodec& Mxfp4Codec();

}  // namespace spk
