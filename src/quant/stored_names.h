// The names compressed-tensors gives the tensors of a quantized Linear module, as suffixes of the
// module's name (docs/formats.md): the one place they are written. The codecs (pack_quantized.h,
// fp4_packed.h, float_quantized.h), the planner, the source decoders and check all spell them
// from here.
//
// Constants only; no errors.
#pragma once

#include <string_view>

namespace spk {

inline constexpr std::string_view kWeightSuffix =
    ".weight";  // dense, or float/int-quantized values
inline constexpr std::string_view kPackedSuffix = ".weight_packed";  // pack-quantized, NVFP4, MXFP4
inline constexpr std::string_view kScaleSuffix = ".weight_scale";
inline constexpr std::string_view kShapeSuffix = ".weight_shape";  // pack-quantized's [out, in]
inline constexpr std::string_view kZeroPointSuffix = ".weight_zero_point";
inline constexpr std::string_view kGlobalScaleSuffix = ".weight_global_scale";  // NVFP4

}  // namespace spk
