// Which modules of a compressed-tensors checkpoint are quantized, for every reader of one
// (dequantize, compare, inspect, check): one rule instead of a suffix test in each.
//
// A module `<m>` is quantized when the tensor holding its values (the codec's TensorRole::kPacked
// suffix: `.weight_packed` for the packed formats) is there. The unpacked formats (float-, int-,
// mxfp8-quantized) keep the values in `<m>.weight`, the name a dense weight has, so there the
// module is quantized when `<m>.weight_scale` is stored beside it or the weight is in a one-byte
// dtype (F8_E4M3, I8, U8) that no dense Hugging Face weight uses: an FP8 weight that lost its
// scale is a broken quantized module, not a dense one.
//
// Pure functions; thread-safe. No errors.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "quant/codec.h"
#include "tensor/dtype.h"

namespace spk {

// The suffix of the tensor that holds a quantized module's values (".weight_packed", ".weight").
std::string_view ValueSuffix(const WeightCodec& codec);

// `<m>` when the tensor `name` of `dtype` holds the values of quantized module `<m>` of `codec`'s
// format; `has_tensor` says whether the checkpoint stores a tensor of that name.
std::optional<std::string> QuantizedModuleOf(
    const WeightCodec& codec, std::string_view name, DType dtype,
    const std::function<bool(const std::string&)>& has_tensor);

// True when `name` is one of the tensors `codec` stores beside the values (weight_scale,
// weight_shape, weight_zero_point, weight_global_scale).
bool IsQuantAuxName(const WeightCodec& codec, std::string_view name);

// The dtype to hand a codec for a module whose weight_scale is `scale_dtype`: scales in the
// weight's dtype say what it was; E4M3 and E8M0 scales do not, and the codecs that store them
// decompress to BF16 whatever the source (WeightCodec::DequantizedDType), so BF16.
DType WeightDTypeOfScales(DType scale_dtype);

// The [rows, cols] of the weight a module stores as values of `values_shape`, for the formats
// that record no weight_shape (FP4 packs two values a byte, F8/I8 one), or nullopt when no valid
// weight of `codec` at `p` is stored that way.
std::optional<std::pair<int64_t, int64_t>> WeightDimsFromValues(
    const WeightCodec& codec, const QuantParams& p, DType dtype,
    const std::vector<int64_t>& values_shape);

}  // namespace spk
