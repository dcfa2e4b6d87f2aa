#include "quant/scheme.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <vector>

#include "quant/float_quantized.h"
#include "quant/fp4_packed.h"
#include "quant/pack_quantized.h"

namespace spk {
namespace {

constexpr int64_t kChannelOnly[] = {kChannelWise};
constexpr int64_t kBlock128[] = {128};
constexpr int64_t kGroup128[] = {128};
constexpr int64_t kGroup16[] = {16};
constexpr int64_t kGroup32[] = {32};

// compressed-tensors' dynamic activation arguments of the presets (quant_scheme.py); the config
// writer fills the other QuantizationArgs keys with their defaults.
constexpr std::string_view kIntPerToken =
    R"({"num_bits": 8, "type": "int", "strategy": "token", "dynamic": true})";
constexpr std::string_view kFp8PerToken =
    R"({"num_bits": 8, "type": "float", "strategy": "token", "dynamic": true})";
constexpr std::string_view kFp8Group128 =
    R"({"num_bits": 8, "type": "float", "strategy": "group", "group_size": 128, "dynamic": true})";

// What every integer pack-quantized row shares: packed int32 words, scales in the weight's dtype,
// Marlin's group sizes, compressed-tensors' "minmax" observer, no activation arguments.
QuantScheme IntWeightOnly(std::string_view name, std::string_view preset, int bits, bool symmetric,
                          std::string_view summary, std::string_view kernels) {
  return {.name = name,
          .preset = preset,
          .alias = "",
          .type = WeightType::kInt,
          .bits = bits,
          .symmetric = symmetric,
          .group_sizes = kMarlinGroupSizes,
          .default_group_size = 128,
          .scale_dtype = ScaleDType::kLikeWeight,
          .strategy = WeightStrategy::kGroupOrChannel,
          .global_scale = false,
          .format = "pack-quantized",
          .input_activations = "",
          .observer = "minmax",
          .summary = summary,
          .kernels = kernels,
          .codec = &PackQuantizedCodec()};
}

// The 2/3/5/6/7-bit rows, written exactly as model_free_ptq writes them: for the symmetric ones
// compressed-tensors' preset (quant_scheme.py _int_wnam: int, group 128, symmetric), for the
// asymmetric ones, which have no preset, the QuantizationScheme object a user gives it (weights =
// QuantizationArgs(num_bits, type "int", symmetric=False, strategy group/channel), targets
// ["Linear"]). Both write observer null and every QuantizationArgs key.
QuantScheme IntWidth(std::string_view name, std::string_view preset, int bits, bool symmetric,
                     std::string_view summary, std::string_view kernels) {
  QuantScheme s = IntWeightOnly(name, preset, bits, symmetric, summary, kernels);
  s.observer = "";
  s.config_group = "";
  return s;
}

// A row written exactly as llm-compressor's model_free_ptq writes its preset (observer null).
QuantScheme Preset(std::string_view name, std::string_view preset, WeightType type, int bits,
                   std::span<const int64_t> group_sizes, ScaleDType scale_dtype,
                   WeightStrategy strategy, std::string_view activations, const WeightCodec& codec,
                   std::string_view summary, std::string_view kernels) {
  return {.name = name,
          .preset = preset,
          .alias = "",
          .type = type,
          .bits = bits,
          .symmetric = true,
          .group_sizes = group_sizes,
          .default_group_size = group_sizes[0],
          .scale_dtype = scale_dtype,
          .strategy = strategy,
          .global_scale = strategy == WeightStrategy::kTensorGroup,
          .format = codec.format(),
          .input_activations = activations,
          .observer = "",
          .summary = summary,
          .kernels = kernels,
          .codec = &codec};
}

QuantScheme WithAlias(QuantScheme s, std::string_view alias) {
  s.alias = alias;
  return s;
}

// The rows. Their config.json is compressed-tensors' own preset (quant_scheme.py PRESET_SCHEMES)
// at our group size; w8a16-asym and the asymmetric 2/3/5/6/7-bit rows have no preset there. vLLM
// 0.32 runs the 2/3/5/6/7-bit rows on no CPU kernel and on CUDA only with the optional Humming
// kernel (docs/formats.md 2.3; check's no-vllm-kernel finding).
// The kernels the model card names (`kernels`) are the first ones vLLM 0.32 picks; vllm/
// kernel_rules.cc lists every GPU generation's. "Its fast W4A16 / W8A16 kernels" are Marlin and
// Machete, which take 4- and 8-bit weights (4-bit with zero points too).
const std::array<QuantScheme, 21> kSchemes = {
    IntWeightOnly("w4a16", "W4A16", 4, true,
                  "int4 weights, symmetric, one BF16/F16 scale per group (vLLM Marlin/Machete)",
                  "its fast W4A16 kernels"),
    IntWeightOnly("w4a16-asym", "W4A16_ASYM", 4, false,
                  "int4 weights, asymmetric: a scale and an int4 zero point per group",
                  "its fast W4A16 kernels"),
    IntWeightOnly("w8a16", "W8A16", 8, true, "int8 weights, symmetric, one scale per group",
                  "its fast W8A16 kernels (CUDA GPUs only: its CPU build runs 4-bit weights)"),
    IntWeightOnly("w8a16-asym", "", 8, false,
                  "int8 weights, asymmetric: a scale and an int8 zero point per group",
                  "MacheteLinearKernel on Hopper (sm90) only: Marlin takes no asymmetric int8, so "
                  "other GPUs fall back to a slower kernel or fail, and its CPU build has none"),
    IntWidth("w2a16", "W2A16", 2, true,
             "int2 weights, symmetric, one scale per group; no stock vLLM 0.32 kernel",
             "HummingLinearKernel alone, from the optional `humming` package: no stock vLLM 0.32 "
             "kernel runs int2 weights (Machete, Marlin, Conch and Exllama take 4 and 8 bits)"),
    IntWidth("w2a16-asym", "", 2, false,
             "int2 weights, asymmetric, with int2 zero points; no stock vLLM 0.32 kernel",
             "HummingLinearKernel alone, from the optional `humming` package: no stock vLLM 0.32 "
             "kernel runs int2 weights (Machete, Marlin, Conch and Exllama take 4 and 8 bits)"),
    IntWidth("w3a16", "W3A16", 3, true,
             "int3 weights, symmetric, one scale per group; no stock vLLM 0.32 kernel",
             "HummingLinearKernel alone, from the optional `humming` package: no stock vLLM 0.32 "
             "kernel runs int3 weights (Machete, Marlin, Conch and Exllama take 4 and 8 bits)"),
    IntWidth("w3a16-asym", "", 3, false,
             "int3 weights, asymmetric, with int3 zero points; no stock vLLM 0.32 kernel",
             "HummingLinearKernel alone, from the optional `humming` package: no stock vLLM 0.32 "
             "kernel runs int3 weights (Machete, Marlin, Conch and Exllama take 4 and 8 bits)"),
    IntWidth("w5a16", "W5A16", 5, true,
             "int5 weights, symmetric, one scale per group; no stock vLLM 0.32 kernel",
             "HummingLinearKernel alone, from the optional `humming` package: no stock vLLM 0.32 "
             "kernel runs int5 weights (Machete, Marlin, Conch and Exllama take 4 and 8 bits)"),
    IntWidth("w5a16-asym", "", 5, false,
             "int5 weights, asymmetric, with int5 zero points; no stock vLLM 0.32 kernel",
             "HummingLinearKernel alone, from the optional `humming` package: no stock vLLM 0.32 "
             "kernel runs int5 weights (Machete, Marlin, Conch and Exllama take 4 and 8 bits)"),
    IntWidth("w6a16", "W6A16", 6, true,
             "int6 weights, symmetric, one scale per group; no stock vLLM 0.32 kernel",
             "HummingLinearKernel alone, from the optional `humming` package: no stock vLLM 0.32 "
             "kernel runs int6 weights (Machete, Marlin, Conch and Exllama take 4 and 8 bits)"),
    IntWidth("w6a16-asym", "", 6, false,
             "int6 weights, asymmetric, with int6 zero points; no stock vLLM 0.32 kernel",
             "HummingLinearKernel alone, from the optional `humming` package: no stock vLLM 0.32 "
             "kernel runs int6 weights (Machete, Marlin, Conch and Exllama take 4 and 8 bits)"),
    IntWidth("w7a16", "W7A16", 7, true,
             "int7 weights, symmetric, one scale per group; no stock vLLM 0.32 kernel",
             "HummingLinearKernel alone, from the optional `humming` package: no stock vLLM 0.32 "
             "kernel runs int7 weights (Machete, Marlin, Conch and Exllama take 4 and 8 bits)"),
    IntWidth("w7a16-asym", "", 7, false,
             "int7 weights, asymmetric, with int7 zero points; no stock vLLM 0.32 kernel",
             "HummingLinearKernel alone, from the optional `humming` package: no stock vLLM 0.32 "
             "kernel runs int7 weights (Machete, Marlin, Conch and Exllama take 4 and 8 bits)"),
    Preset("w4afp8", "W4AFP8", WeightType::kInt, 4, kGroup128, ScaleDType::kLikeWeight,
           WeightStrategy::kGroupOrChannel, kFp8PerToken, IntQuantizedCodec(),
           "int4 weights per group of 128 (as I8), FP8 activations per token; vLLM: Hopper only",
           "CutlassW4A8LinearKernel on Hopper (sm90) only (Machete and Marlin take no signed "
           "int4; other GPUs have no kernel for it), reading pack-quantized weights: this "
           "int-quantized layout loads on no vLLM release (quantize needs --allow-unloadable)"),
    WithAlias(Preset("w8a8", "W8A8", WeightType::kInt, 8, kChannelOnly, ScaleDType::kLikeWeight,
                     WeightStrategy::kGroupOrChannel, kIntPerToken, IntQuantizedCodec(),
                     "int8 weights per channel, int8 activations per token at run time",
                     "its CUTLASS int8 scaled-mm kernels (sm75+; Triton int8 for shapes CUTLASS "
                     "does not take) and CPUInt8ScaledMMLinearKernel on its CPU build"),
              "INT8"),
    Preset("fp8-dynamic", "FP8_DYNAMIC", WeightType::kFloat, 8, kChannelOnly,
           ScaleDType::kLikeWeight, WeightStrategy::kGroupOrChannel, kFp8PerToken,
           Fp8ChannelCodec(), "FP8 E4M3 weights per channel, FP8 activations per token",
           "its CUTLASS FP8 scaled-mm kernels on Ada, Hopper and Blackwell (sm89+), and on "
           "Turing/Ampere as FP8 weights only on Marlin FP8"),
    Preset("fp8-block", "FP8_BLOCK", WeightType::kFloat, 8, kBlock128, ScaleDType::kLikeWeight,
           WeightStrategy::kBlock, kFp8Group128, Fp8BlockCodec(),
           "FP8 E4M3 weights per 128x128 block, FP8 activations per group of 128",
           "its FP8 block-scaled kernels (DeepGEMM/FlashInfer, CUTLASS, Marlin FP8, Triton) on "
           "every GPU and its CPU build"),
    Preset("nvfp4a16", "NVFP4A16", WeightType::kFloat, 4, kGroup16, ScaleDType::kF8E4M3,
           WeightStrategy::kTensorGroup, "", Nvfp4Codec(),
           "FP4 E2M1 weights, an FP8 scale per 16 and a global scale per fused tensor",
           "FlashInferCuteDslNvFp4W4A16LinearKernel on Blackwell (sm100/103) and "
           "MarlinNvFp4LinearKernel on other GPUs (sm75+)"),
    Preset("mxfp4a16", "MXFP4A16", WeightType::kFloat, 4, kGroup32, ScaleDType::kE8M0,
           WeightStrategy::kGroupOrChannel, "", Mxfp4Codec(),
           "FP4 E2M1 weights, a power-of-two (E8M0) scale per 32",
           "FlashInferMxFp4LinearKernel on Blackwell (sm100+, which quantizes the activations to "
           "MXFP4 too) and MarlinMxFp4LinearKernel on other GPUs (sm80+)"),
    Preset("mxfp8a16", "MXFP8A16", WeightType::kFloat, 8, kGroup32, ScaleDType::kE8M0,
           WeightStrategy::kGroupOrChannel, "", Mxfp8Codec(),
           "FP8 E4M3 weights, a power-of-two (E8M0) scale per 32",
           "FlashInfer CuTe-DSL/CUTLASS MXFP8 kernels on Blackwell and MarlinMxfp8LinearKernel "
           "on other GPUs (sm75+)"),
};

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// "fp8_dynamic" and "fp8-dynamic" name the same row: the presets spell with '_', the rows '-'.
bool NamesRow(const QuantScheme& s, std::string_view name) {
  std::string dashed(name);
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  return EqualsIgnoringCase(s.name, name) || EqualsIgnoringCase(s.name, dashed) ||
         (!s.preset.empty() && EqualsIgnoringCase(s.preset, name)) ||
         (!s.alias.empty() && EqualsIgnoringCase(s.alias, name));
}

}  // namespace

std::string_view WeightTypeName(WeightType type) {
  switch (type) {
    case WeightType::kInt:
      return "int";
    case WeightType::kFloat:
      return "float";
  }
  return "int";
}

std::span<const QuantScheme> AllSchemes() { return kSchemes; }

std::string_view ScaleDTypeName(ScaleDType dtype) {
  switch (dtype) {
    case ScaleDType::kLikeWeight:
      return "";
    case ScaleDType::kF8E4M3:
      return "torch.float8_e4m3fn";
    case ScaleDType::kE8M0:
      return "torch.uint8";
  }
  return "";
}

std::string_view StrategyName(WeightStrategy strategy, int64_t group_size) {
  switch (strategy) {
    case WeightStrategy::kBlock:
      return "block";
    case WeightStrategy::kTensorGroup:
      return "tensor_group";
    case WeightStrategy::kGroupOrChannel:
      break;
  }
  return group_size == kChannelWise ? "channel" : "group";
}

const QuantScheme* FindScheme(std::string_view name) {
  for (const QuantScheme& scheme : kSchemes) {
    if (NamesRow(scheme, name)) return &scheme;
  }
  return nullptr;
}

const QuantScheme* FindSchemeFor(std::string_view format, std::string_view type, int bits,
                                 bool symmetric, std::string_view strategy) {
  for (const QuantScheme& scheme : kSchemes) {
    const bool same_strategy =
        scheme.strategy == WeightStrategy::kGroupOrChannel
            ? (strategy == "group" || strategy == "channel" || strategy.empty())
            : StrategyName(scheme.strategy, 0) == strategy;
    if ((format.empty() || scheme.format == format) && WeightTypeName(scheme.type) == type &&
        scheme.bits == bits && scheme.symmetric == symmetric && same_strategy) {
      return &scheme;
    }
  }
  return nullptr;
}

std::string WeightNumberName(const QuantScheme& scheme) {
  if (scheme.type == WeightType::kInt) return fmt::format("int{}", scheme.bits);
  if (scheme.scale_dtype == ScaleDType::kE8M0) return fmt::format("mxfp{}", scheme.bits);
  if (scheme.scale_dtype == ScaleDType::kF8E4M3) return fmt::format("nvfp{}", scheme.bits);
  return fmt::format("fp{}", scheme.bits);
}

Result<SchemeSelection> SelectScheme(std::string_view name, std::optional<int64_t> group_size) {
  const QuantScheme* scheme = FindScheme(name);
  if (scheme == nullptr) {
    return Status::Usage(fmt::format("unknown scheme '{}': use one of {}", name, SchemeNames()));
  }
  const int64_t g = group_size.value_or(scheme->default_group_size);
  SPK_RETURN_IF_ERROR(ValidateGroupSize(*scheme, g));
  return SchemeSelection{scheme, g};
}

std::string SchemeNames() {
  std::vector<std::string_view> names;
  for (const QuantScheme& s : kSchemes) names.push_back(s.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

bool IsMarlinGroupSize(int64_t group_size) {
  return group_size > 0 && std::find(std::begin(kMarlinGroupSizes), std::end(kMarlinGroupSizes),
                                     group_size) != std::end(kMarlinGroupSizes);
}

bool AllowsGroupSize(const QuantScheme& scheme, int64_t group_size) {
  return std::find(scheme.group_sizes.begin(), scheme.group_sizes.end(), group_size) !=
         scheme.group_sizes.end();
}

std::string GroupSizeList(const QuantScheme& scheme) { return GroupSizeList(scheme.group_sizes); }

std::string GroupSizeList(std::span<const int64_t> group_sizes) {
  std::vector<int64_t> groups;
  bool channel = false;
  for (int64_t g : group_sizes) {
    if (g == kChannelWise) {
      channel = true;
    } else {
      groups.push_back(g);
    }
  }
  std::string list = fmt::format("{}", fmt::join(groups, ", "));
  if (channel) list += groups.empty() ? "-1 (channel-wise)" : " or -1 (channel-wise)";
  return list;
}

Status ValidateGroupSize(const QuantScheme& scheme, int64_t group_size) {
  if (AllowsGroupSize(scheme, group_size)) return Status::Ok();
  return Status::Usage(
      fmt::format("--group-size {} is not supported: use {}", group_size, GroupSizeList(scheme)));
}

QuantParams ParamsFor(const QuantScheme& scheme, int64_t group_size) {
  return QuantParams{.bits = scheme.bits, .symmetric = scheme.symmetric, .group_size = group_size};
}

}  // namespace spk
