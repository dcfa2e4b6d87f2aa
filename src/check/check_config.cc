// The rules draft-offset and quantization-config: quantization_config (formats, schemes, group
// sizes, keys, patterns) as the view read it.
#include "check/check_rules.h"

#include "quant/pack_quantized.h"
#include "quant/scheme.h"
#include "vllm/kernel_rules.h"

namespace spk::check_internal {
namespace {

bool IsRegistryFormat(const std::string& format) {
  for (const QuantScheme& row : AllSchemes()) {
    if (row.format == format) return true;
  }
  return false;
}

std::string RegistryFormats() {
  std::set<std::string_view> formats;
  for (const QuantScheme& row : AllSchemes()) formats.insert(row.format);
  return fmt::format("{}", fmt::join(formats, ", "));
}

// vLLM 0.32's scalar type for a WNA16 width (compressed_tensors_wNa16.py
// WNA16_SUPPORTED_TYPES_MAP: uint<N>b<2^(N-1)>; WNA16_ZP_SUPPORTED_TYPES_MAP: uint<N>), the name
// its kernel-selection error prints.
std::string VllmWnaType(int bits, bool symmetric) {
  return symmetric ? fmt::format("uint{}b{}", bits, 1 << (bits - 1)) : fmt::format("uint{}", bits);
}

// True when a kernel of a stock vLLM 0.32 takes the width: on the CPU CPUWNA16LinearKernel takes
// uint4/uint4b8 only (cpu.py), on CUDA Machete, Marlin, Conch and Exllama take 4- and 8-bit types
// only; 2/3/5/6/7 bits reach HummingLinearKernel alone, which needs the optional `humming` package.
bool StockVllmRunsWidth(int bits) { return bits == 4 || bits == 8; }

}  // namespace

void DraftOffset(const CheckView& v, FindingSink& sink) {
  if (IsDraft(v.family.family) && !v.naming.offset_known) {
    sink.Add(
        FindingCode::kDraftOffsetUnknown, "", "config.json",
        std::string(kDraftOffsetUnknownReason) + "; per-layer ignore entries cannot be checked",
        "pass --target TARGET or --target-layers N");
  }
}

void QuantizationConfigRule(const CheckView& v, FindingSink& sink) {
  const QuantState& q = v.quant;
  if (!q.parse_error.empty()) {
    sink.Add(FindingCode::kQuantConfigInvalid, "", "config.json", q.parse_error,
             "rewrite quantization_config in the form of docs/formats.md 2.2");
    return;
  }
  if (!q.other_method.empty()) {
    sink.Add(FindingCode::kQuantMethodNotChecked, "", "config.json",
             fmt::format("quant_method '{}': only compressed-tensors checkpoints are checked "
                         "module by module",
                         q.other_method),
             "");
    return;
  }
  if (!q.qc) return;
  if (q.scheme) {
    if (const KernelRule* row = KernelRuleFor(*q.scheme->scheme);
        row != nullptr && !row->layout_loads_nowhere.empty()) {
      sink.Add(FindingCode::kLayoutLoadsNowhere, "", "config.json",
               std::string(row->layout_loads_nowhere),
               "requantize with a scheme vLLM loads: sparkulator quantize --scheme w4a16 (the "
               "same int4 weights), w8a8 or fp8-dynamic");
    }
  }
  auto check_format = [&](const std::string& format, const std::string& where) {
    if (format.empty() || IsRegistryFormat(format)) return;
    if (FormatsNotChecked().count(format)) {
      sink.Add(FindingCode::kFormatNotChecked, "", "config.json",
               fmt::format("{} format '{}' is not verified tensor by tensor", where, format), "");
    } else {
      sink.Add(FindingCode::kUnknownFormat, "", "config.json",
               fmt::format("{} format '{}' is not a compressed-tensors format vLLM knows", where,
                           format),
               fmt::format("use one of the formats sparkulator writes and checks ({})",
                           RegistryFormats()));
    }
  };
  check_format(q.qc->format, "quantization_config");
  for (size_t gi = 0; gi < q.qc->groups.size(); ++gi) {
    const ConfigGroup& g = q.qc->groups[gi];
    check_format(g.format, "config_groups." + g.name);
    for (const auto& [pattern, why] : q.targets[gi].invalid) {
      sink.Add(FindingCode::kTargetInvalidRegex, pattern, "config.json", why,
               "fix the pattern (Python re syntax)");
    }
    const QuantScheme* row = g.weights ? FindSchemeFor(*g.weights) : nullptr;
    // A registry row with activation arguments (W8A8, FP8, W4AFP8) is checked as that row.
    if (g.has_input_activations && (row == nullptr || row->input_activations.empty())) {
      sink.Add(FindingCode::kNotWeightOnly, g.name, "config.json",
               "the group quantizes activations too; only weight-only schemes are checked in full",
               "");
    }
    if (!g.weights) continue;
    const WeightQuantArgs& w = *g.weights;
    const QuantScheme* scheme = FindSchemeFor(w);
    bool known_bits = scheme != nullptr;
    // A row of the registry in another format (FP8 blocks, NVFP4 tensor groups) has that
    // format's strategies; format-not-checked above says its tensors are not verified yet.
    bool other_format = scheme != nullptr && scheme->codec != &PackQuantizedCodec();
    bool known_strategy = w.strategy == "group" || w.strategy == "channel" || other_format;
    if (!known_bits || !known_strategy) {
      sink.Add(
          FindingCode::kUnknownScheme, g.name, "config.json",
          fmt::format("weights type '{}' num_bits {} strategy '{}' is not an integer W2A16..W8A16 "
                      "scheme vLLM's WNA16 path runs",
                      w.type, w.num_bits, w.strategy),
          "use type int, num_bits 2 to 8, strategy group or channel");
    }
    if (w.strategy == "group") {
      int64_t gs = w.group_size.value_or(0);
      if (gs == kChannelWise || !IsKernelGroupSize(gs)) {
        sink.Add(FindingCode::kGroupSizeUnsupported, g.name, "config.json",
                 fmt::format("group_size {} has no vLLM (Marlin) kernel", gs),
                 "requantize with group size 32, 64, 128 or channel-wise");
      }
    }
    if (scheme != nullptr && scheme->codec == &PackQuantizedCodec() &&
        !StockVllmRunsWidth(w.num_bits)) {
      const std::string type = VllmWnaType(w.num_bits, w.symmetric);
      AddWna16KernelFinding(
          v, sink, FindingCode::kNoVllmKernel, g.name, "config.json",
          fmt::format("{}-bit weights are vLLM scalar type {}, which no kernel of vLLM 0.32 runs "
                      "without the optional humming package: on the CPU vLLM fails to start with "
                      "\"ValueError: Failed to find a kernel that can implement the WNA16 linear "
                      "layer. Reasons: ... CPUWNA16LinearKernel cannot implement due to: Quant "
                      "type ({}) not supported by CPUWNA16\"; on CUDA only HummingLinearKernel "
                      "takes it (Machete, Marlin, Conch and Exllama take 4 and 8 bits)",
                      w.num_bits, type, type),
          "serve on CUDA with `pip install humming`, or requantize with w4a16 (or w8a16)");
    }
    if (!w.symmetric && w.num_bits == 8) {
      sink.Add(FindingCode::kAsymInt8NoMarlin, g.name, "config.json",
               "asymmetric int8 never runs on Marlin; vLLM falls back to a slower kernel or fails",
               "use symmetric int8 (w8a16)");
    }
  }
  for (const std::string& key : q.qc->unknown_weight_keys) {
    // A key set to a value changes what newer releases do and fails older ones: an error. Set to
    // null (llm-compressor 0.13+ writes "scale_dtype": null) it only fails the old releases.
    bool set = false;
    for (const auto& [name, group] :
         v.config.json["quantization_config"]["config_groups"].items()) {
      if (group.contains("weights") && group["weights"].is_object() &&
          group["weights"].contains(key) && !group["weights"][key].is_null()) {
        set = true;
      }
    }
    // model_free_ptq itself writes these keys for the other formats and the 2/3/5/6/7-bit widths,
    // so an install that loads its checkpoints reads them; only the 4/8-bit pack-quantized rows,
    // where sparkulator leaves them out, are judged.
    const bool format_needs_keys = q.scheme && WritesReferenceConfig(*q.scheme->scheme);
    if (format_needs_keys) continue;
    sink.Add(
        FindingCode::kQuantArgsKey, set ? Severity::kError : Severity::kWarning, key, "config.json",
        fmt::format("QuantizationArgs key '{}'{} is rejected by older compressed-tensors "
                    "releases (\"extra fields not permitted\"), so vLLM installs with them fail "
                    "to load the checkpoint",
                    key, set ? "" : " (null)"),
        fmt::format("remove '{}' from config_groups.*.weights (docs/formats.md 2.2)", key));
  }
  if (!q.ignore_error.empty()) {
    sink.Add(FindingCode::kIgnoreInvalidRegex, "", "config.json", q.ignore_error,
             "fix the pattern (Python re syntax)");
  }
}

}  // namespace spk::check_internal
