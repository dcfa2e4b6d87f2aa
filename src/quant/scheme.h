// The quantization scheme registry: one table (scheme.cc, ggml-style) with a row per format that
// sparkulator writes. `--help`, flag validation, the config writer and reader (model/
// quant_config.h), the plan's group-size rule, quantize, dequantize, compare, inspect, check, the
// model card (card/card.h) and the tests all iterate or look up this table, so adding a format is a
// row, a codec (quant/codec.h), its kernels and its tests.
//
// The table lives for the whole program, so `const QuantScheme*` and the string_views in it never
// dangle. Pure functions over constant data: thread-safe. Errors: ValidateGroupSize returns Usage
// with the values the row allows.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "quant/codec.h"
#include "quant/params.h"

namespace spk {

// compressed-tensors' QuantizationType, the `type` of QuantizationArgs. FP8, NVFP4 and MXFP4 are
// all "float" there; they differ in num_bits, group size and scale dtype.
enum class WeightType { kInt, kFloat };
// The value of QuantizationArgs.type: "int" or "float".
std::string_view WeightTypeName(WeightType type);

// The dtype of the stored scales (QuantizationArgs.scale_dtype).
enum class ScaleDType {
  kLikeWeight,  // the source weight's dtype (BF16, F16 or F32), as llm-compressor writes W4A16
  kF8E4M3,      // "torch.float8_e4m3fn": NVFP4 group scales
  kE8M0,        // "torch.uint8": MX exponents
};
// The value QuantizationArgs.scale_dtype records: "" (null) for kLikeWeight.
std::string_view ScaleDTypeName(ScaleDType dtype);

// QuantizationArgs.strategy of the weights: group or channel by the group size (-1 = channel),
// 128 x 128 blocks, or groups under a per-tensor global scale (NVFP4).
enum class WeightStrategy { kGroupOrChannel, kBlock, kTensorGroup };
// "group", "channel", "block" or "tensor_group" for a row at `group_size`.
std::string_view StrategyName(WeightStrategy strategy, int64_t group_size);

// The group sizes vLLM's Marlin WNA16 kernels run (gptq_marlin / machete: -1, 32, 64, 128).
inline constexpr int64_t kMarlinGroupSizes[] = {kChannelWise, 32, 64, 128};
// True for a positive group size a Marlin kernel runs (32, 64, 128).
bool IsMarlinGroupSize(int64_t group_size);

struct QuantScheme {
  std::string_view name;    // "w4a16": the --scheme value and the label inspect/check print
  std::string_view preset;  // compressed-tensors / llm-compressor preset name, "" when none
  std::string_view alias;   // another preset name for the same row ("INT8"), "" when none
  WeightType type;
  int bits;                              // weight bits: 2..8 (int), 4 or 8 (float)
  bool symmetric;                        // false: the checkpoint carries weight_zero_point
  std::span<const int64_t> group_sizes;  // allowed group sizes; kChannelWise = per channel
  int64_t default_group_size;            // the --group-size default
  ScaleDType scale_dtype;
  WeightStrategy strategy;
  bool global_scale;        // a per-tensor weight_global_scale (NVFP4)
  std::string_view format;  // compressed-tensors format: "pack-quantized"
  // The preset's input_activations QuantizationArgs as JSON ("" = weight-only, null): the
  // dynamic activations vLLM quantizes at run time for W8A8, FP8_DYNAMIC, FP8_BLOCK and W4AFP8.
  std::string_view input_activations;
  std::string_view observer;  // QuantizationArgs.observer we record: "minmax"; "" writes null
  std::string_view summary;   // one line for --help and the model card's description
  // The kernels vLLM 0.32 runs the row on, in the model card's words: a noun phrase that completes
  // "written in the compressed-tensors `pack-quantized` format that vLLM loads on ...". The shape
  // rules and each GPU generation's kernel list are vllm/kernel_rules.h's.
  std::string_view kernels;
  const WeightCodec* codec;  // stored tensors, quantize and dequantize rows
  // The key of config.json's one config group; "" names it as model_free_ptq does (the preset
  // at its group size, else "config_group_0", its name for a QuantizationScheme object): the
  // 2/3/5/6/7-bit rows. The rows written before keep "group_0" (vLLM and compressed-tensors read
  // any name).
  std::string_view config_group = "group_0";
};

// True for rows whose quantization_config is exactly what model_free_ptq writes (every
// QuantizationArgs key, observer null); the original int rows record the "minmax" observer they
// emulate and leave out the keys older compressed-tensors releases reject.
inline bool WritesReferenceConfig(const QuantScheme& s) { return s.observer.empty(); }

// Every scheme, in help order: w4a16, w4a16-asym, w8a16, w8a16-asym, w2a16 .. w7a16-asym, then
// the float and activation-quantized rows.
std::span<const QuantScheme> AllSchemes();
// The scheme whose name, preset or alias is `name`, ignoring case ("w4a16", "W4A16",
// "fp8_dynamic", "INT8"), or nullptr.
const QuantScheme* FindScheme(std::string_view name);
// The scheme a parsed quantization_config describes (format, type "int"/"float", num_bits,
// symmetric, strategy), or nullptr when sparkulator has no such row. An empty format matches any
// row (configs that omit it). The group size is checked separately (AllowsGroupSize): a row with a
// strange group size is still that scheme, wrongly grouped.
const QuantScheme* FindSchemeFor(std::string_view format, std::string_view type, int bits,
                                 bool symmetric, std::string_view strategy);

// The weights' number type, for model-card tags and words: "int4", "int8" (integer rows), "fp8"
// (FP8 E4M3), "nvfp4" (FP4 under FP8 scales and a global scale), "mxfp4" / "mxfp8" (E8M0 scales).
std::string WeightNumberName(const QuantScheme& scheme);

// "w4a16, w4a16-asym, ...": the names, for messages.
std::string SchemeNames();

// True when `group_size` is one of the row's group sizes.
bool AllowsGroupSize(const QuantScheme& scheme, int64_t group_size);
// "32, 64, 128 or -1 (channel-wise)": the row's group sizes, for messages and --help.
std::string GroupSizeList(const QuantScheme& scheme);
std::string GroupSizeList(std::span<const int64_t> group_sizes);
// Ok, or Usage "--group-size G is not supported: use 32, 64, 128 or -1 (channel-wise)".
Status ValidateGroupSize(const QuantScheme& scheme, int64_t group_size);

// What --scheme NAME [--group-size G] chooses: the row (by name or preset name, any case) and the
// group size (G, else the row's default), validated. Usage naming the choices otherwise.
struct SchemeSelection {
  const QuantScheme* scheme = nullptr;
  int64_t group_size = 0;
};
Result<SchemeSelection> SelectScheme(std::string_view name, std::optional<int64_t> group_size);

// The kernel parameters of `scheme` at `group_size`.
QuantParams ParamsFor(const QuantScheme& scheme, int64_t group_size);

}  // namespace spk
