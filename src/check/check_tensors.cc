// The verdict on one pack-quantized module's tensors (shapes, dtypes, zero points, scale values),
// taken while the CheckView is built (DeriveLinears); the rule module-tensors reports it.
#include "check/check_view.h"

#include <cmath>

#include "quant/float_formats.h"
#include "quant/scheme.h"
#include "tensor/float_convert.h"

namespace spk::check_internal {

namespace {

// compressed-tensors before 0.17 packed floor(32 / bits) whole values into each int32 word, so a
// width that does not divide 32 (3, 5, 6, 7) left padding bits and more words per row than
// today's packing across word boundaries. For the other widths both layouts are the same.
bool IsLegacyWholeValuePacking(const std::vector<int64_t>& packed, int64_t out, int64_t in,
                               int bits) {
  if (32 % bits == 0) return false;
  const int64_t per_word = 32 / bits;
  return packed == std::vector<int64_t>{out, (in + per_word - 1) / per_word};
}

}  // namespace

std::optional<std::pair<int64_t, int64_t>> VerifyPackedTensors(const CheckView& v,
                                                               const std::string& module,
                                                               const ModuleTensors& mt,
                                                               const WeightQuantArgs& args,
                                                               FindingList* problems) {
  const TensorEntry& packed = *mt.packed->entry;
  const std::string file = v.FileOf(*mt.packed);
  int bits = args.num_bits;
  if (packed.dtype != DType::kI32 || packed.shape.size() != 2 || bits < kMinIntBits ||
      bits > kMaxIntBits) {
    problems->Add(FindingCode::kWeightPackedShape, module, file,
                  fmt::format("weight_packed is {} {}; expected a 2-D I32 tensor",
                              DTypeName(packed.dtype), ShapeToString(packed.shape)),
                  "requantize the module");
    return std::nullopt;
  }
  int64_t out = packed.shape[0], in = packed.shape[1] * 32 / bits;
  if (!mt.shape) {
    problems->Add(FindingCode::kMissingWeightShape, module, file,
                  "weight_shape is missing: vLLM cannot unpack the weight",
                  "requantize the module");
  } else {
    const TensorEntry& shape = *mt.shape->entry;
    if (shape.dtype != DType::kI64 || shape.shape != std::vector<int64_t>{2}) {
      problems->Add(FindingCode::kWeightShapeInvalid, module, v.FileOf(*mt.shape),
                    fmt::format("weight_shape is {} {}; expected I64 [2]", DTypeName(shape.dtype),
                                ShapeToString(shape.shape)),
                    "requantize the module");
    } else {
      int64_t dims[2] = {0, 0};
      Status read =
          v.Reader(*mt.shape).ReadTensor(shape, {reinterpret_cast<uint8_t*>(dims), sizeof dims});
      if (!read.ok()) {
        problems->Add(FindingCode::kSafetensorsInvalid, module, v.FileOf(*mt.shape), read.message(),
                      "");
      } else {
        out = dims[0];
        in = dims[1];
      }
    }
  }
  if (out > 0 && in > 0 && IsLegacyWholeValuePacking(packed.shape, out, in, bits)) {
    problems->Add(
        FindingCode::kWeightPackedLegacyLayout, module, file,
        fmt::format("weight_packed is {}: {} whole int{} values per int32 word, as "
                    "compressed-tensors before 0.17 packed them; vLLM packs int{} across words "
                    "and expects {}, so its weight loader fails an assertion "
                    "(model_executor/parameter.py: param_data.shape == loaded_weight.shape)",
                    ShapeToString(packed.shape), 32 / bits, bits, bits,
                    ShapeToString(PackedShape(out, in, bits))),
        "requantize the source checkpoint with sparkulator (or compressed-tensors 0.17 or newer), "
        "which packs across words");
    return std::nullopt;
  }
  if (out <= 0 || in <= 0 || packed.shape != PackedShape(out, in, bits)) {
    problems->Add(FindingCode::kWeightPackedShape, module, file,
                  fmt::format("weight_packed is {} but weight_shape [{}, {}] at {} bits needs {}",
                              ShapeToString(packed.shape), out, in, bits,
                              out > 0 && in > 0 ? ShapeToString(PackedShape(out, in, bits))
                                                : "positive dims"),
                  "requantize the module");
    return std::nullopt;
  }
  int64_t g = args.strategy == "group" ? args.group_size.value_or(0) : kChannelWise;
  // A group size vLLM has no kernel for is reported once, for its config group
  // (group-size-unsupported); the shapes it would imply are not checked module by module.
  const bool group_known = IsKernelGroupSize(g);
  if (group_known && g != kChannelWise && in % g != 0) {
    problems->Add(FindingCode::kGroupDoesNotDivide, module, file,
                  fmt::format("in_features {} is not a multiple of group_size {}", in, g),
                  "keep the module dense (ignore it)");
    return std::nullopt;
  }
  if (!mt.scale) {
    problems->Add(
        FindingCode::kMissingWeightScale, module, file,
        "weight_scale is missing: vLLM does not report it and runs on uninitialised memory",
        "requantize the module (or restore the shard that held weight_scale)");
  } else if (group_known) {
    const TensorEntry& scale = *mt.scale->entry;
    std::vector<int64_t> want = ScaleShape(out, in, g);
    if (!IsQuantizableFloat(scale.dtype) || scale.shape != want) {
      problems->Add(
          FindingCode::kWeightScaleShape, module, v.FileOf(*mt.scale),
          fmt::format("weight_scale is {} {}; expected a BF16/F16/F32 tensor {}",
                      DTypeName(scale.dtype), ShapeToString(scale.shape), ShapeToString(want)),
          "requantize the module");
    } else {
      VerifyScaleValues(v, module, *mt.scale, problems);
    }
  }
  if (args.symmetric && mt.zero_point) {
    problems->Add(
        FindingCode::kZeroPointInSymmetric, module, v.FileOf(*mt.zero_point),
        "weight_zero_point in a symmetric scheme: vLLM has no parameter for it and fails to load",
        "delete the weight_zero_point tensors, or declare symmetric: false if they are real");
  } else if (!args.symmetric && !mt.zero_point) {
    problems->Add(
        FindingCode::kMissingZeroPoint, module, file,
        "asymmetric scheme without weight_zero_point: vLLM dequantizes with an uninitialised "
        "zero point",
        "requantize the module");
  } else if (!args.symmetric && group_known) {
    const TensorEntry& zp = *mt.zero_point->entry;
    std::vector<int64_t> want = ZeroPointShape(out, in, bits, g);
    if (zp.dtype != DType::kI32 || zp.shape != want) {
      problems->Add(
          FindingCode::kZeroPointShape, module, v.FileOf(*mt.zero_point),
          fmt::format("weight_zero_point is {} {}; expected I32 {} (packed along the out dim)",
                      DTypeName(zp.dtype), ShapeToString(zp.shape), ShapeToString(want)),
          "requantize the module");
    }
  }
  if (!group_known) return std::nullopt;  // no kernel rule to check either
  return std::pair{out, in};
}

void VerifyScaleValues(const CheckView& v, const std::string& module, const Located& scale,
                       FindingList* problems) {
  const TensorEntry& e = *scale.entry;
  std::vector<uint8_t> bytes(e.nbytes());
  Status read = v.Reader(scale).ReadTensor(e, bytes);
  if (!read.ok()) {
    problems->Add(FindingCode::kSafetensorsInvalid, module, v.FileOf(scale), read.message(), "");
    return;
  }
  // E4M3 (NVFP4) and E8M0 (MX, 255 is NaN) scales decode as the formats define them.
  std::vector<float> values(e.num_elements());
  for (size_t i = 0; e.dtype == DType::kF8E4M3 && i < values.size(); ++i) {
    values[i] = E4M3ToFloat(bytes[i]);
  }
  for (size_t i = 0; e.dtype == DType::kU8 && i < values.size(); ++i) {
    values[i] = bytes[i] == 255 ? NAN : MxDecompressedScale(bytes[i]);
  }
  if (IsQuantizableFloat(e.dtype))
    ConvertToFloat(e.dtype, bytes.data(), values.data(), values.size());
  size_t nonfinite = 0, zero = 0, negative = 0;
  for (float v : values) {
    if (!std::isfinite(v)) {
      ++nonfinite;
    } else if (v == 0.0f) {
      ++zero;
    } else if (v < 0.0f) {
      ++negative;
    }
  }
  auto add = [&](size_t count, FixedCode code, const char* what) {
    if (count == 0) return;
    problems->Add(
        code, module, v.FileOf(scale),
        fmt::format("{} of {} {}.weight_scale values are {}: the dequantized weights are garbage",
                    count, values.size(), module, what),
        "requantize the module from the source weights");
  };
  add(nonfinite, FindingCode::kScaleNotFinite, "NaN or Inf");
  add(zero, FindingCode::kScaleZero, "zero");
  add(negative, FindingCode::kScaleNegative, "negative");
}

}  // namespace spk::check_internal
