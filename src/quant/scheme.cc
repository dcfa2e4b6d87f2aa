#include "quant/scheme.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <vector>

#include "quant/pack_quantized.h"

namespace spk {
namespace {

// What every integer weight-only row shares: packed int32 words, scales in the weight's dtype,
// Marlin's group sizes, compressed-tensors' "minmax" observer, no activation arguments.
QuantScheme IntWeightOnly(std::string_view name, std::string_view preset, int bits, bool symmetric,
                          std::string_view summary) {
  return {.name = name,
          .preset = preset,
          .type = WeightType::kInt,
          .bits = bits,
          .symmetric = symmetric,
          .group_sizes = kMarlinGroupSizes,
          .default_group_size = 128,
          .scale_dtype = ScaleDType::kLikeWeight,
          .global_scale = false,
          .format = "pack-quantized",
          .input_activations = "",
          .observer = "minmax",
          .summary = summary,
          .codec = &PackQuantizedCodec()};
}

// The rows. Their config.json is compressed-tensors' own preset (quant_scheme.py PRESET_SCHEMES)
// at our group size; w8a16-asym has no preset there.
const std::array<QuantScheme, 4> kSchemes = {
    IntWeightOnly("w4a16", "W4A16", 4, true,
                  "int4 weights, symmetric, one BF16/F16 scale per group (vLLM Marlin/Machete)"),
    IntWeightOnly("w4a16-asym", "W4A16_ASYM", 4, false,
                  "int4 weights, asymmetric: a scale and an int4 zero point per group"),
    IntWeightOnly("w8a16", "W8A16", 8, true, "int8 weights, symmetric, one scale per group"),
    IntWeightOnly("w8a16-asym", "", 8, false,
                  "int8 weights, asymmetric: a scale and an int8 zero point per group"),
};

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

const QuantScheme* FindScheme(std::string_view name) {
  for (const QuantScheme& scheme : kSchemes) {
    if (scheme.name == name) return &scheme;
  }
  return nullptr;
}

const QuantScheme* FindSchemeFor(std::string_view type, int bits, bool symmetric) {
  for (const QuantScheme& scheme : kSchemes) {
    if (WeightTypeName(scheme.type) == type && scheme.bits == bits &&
        scheme.symmetric == symmetric) {
      return &scheme;
    }
  }
  return nullptr;
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
