// Checker parts: config.json and quantization_config (formats, schemes, group sizes, keys).
#include "check/checker.h"

#include "quant/pack_quantized.h"
#include "quant/scheme.h"

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

// A config.json that cannot be read is an error of the run (as in LoadFiles); one that does not
// parse is a finding.
Result<bool> Checker::LoadConfig() {
  std::string path = dir_ + "/config.json";
  if (!fs_->FileExists(path)) {
    Add(FindingCode::kConfigMissing, "", "config.json",
        "no config.json: vLLM cannot build the model", "copy config.json from the source model");
    return false;
  }
  SPK_ASSIGN_OR_RETURN(std::string text, fs_->ReadFile(path));
  auto parsed = ParseModelConfig(path, text);
  if (!parsed.ok()) {
    Add(FindingCode::kConfigInvalid, "", "config.json", parsed.status().message(),
        "fix config.json");
    return false;
  }
  config_ = std::move(parsed).value();
  return true;
}

void Checker::CheckQuantConfig() {
  report_.scheme = "dense";
  if (!config_.has_quantization_config) return;
  auto parsed = ParseQuantizationConfig("config.json", config_.json);
  if (!parsed.ok()) {
    Add(FindingCode::kQuantConfigInvalid, "", "config.json", parsed.status().message(),
        "rewrite quantization_config in the form of docs/formats.md 2.2");
    return;
  }
  if (parsed->quant_method != "compressed-tensors") {
    Add(FindingCode::kQuantMethodNotChecked, "", "config.json",
        fmt::format("quant_method '{}': only compressed-tensors checkpoints are checked module "
                    "by module",
                    parsed->quant_method),
        "");
    return;
  }
  qc_ = std::move(parsed).value();
  if (auto scheme = SchemeFromConfig("config.json", config_); scheme.ok()) scheme_ = *scheme;
  auto check_format = [&](const std::string& format, const std::string& where) {
    if (format.empty() || IsRegistryFormat(format)) return;
    if (FormatsNotChecked().count(format)) {
      Add(FindingCode::kFormatNotChecked, "", "config.json",
          fmt::format("{} format '{}' is not verified tensor by tensor", where, format), "");
    } else {
      Add(FindingCode::kUnknownFormat, "", "config.json",
          fmt::format("{} format '{}' is not a compressed-tensors format vLLM knows", where,
                      format),
          fmt::format("use one of the formats sparkulator writes and checks ({})",
                      RegistryFormats()));
    }
  };
  check_format(qc_->format, "quantization_config");
  std::vector<std::string> labels;
  for (const ConfigGroup& g : qc_->groups) {
    check_format(g.format, "config_groups." + g.name);
    std::vector<std::optional<ModulePattern>> targets;
    for (const std::string& t : g.targets) {
      if (t == "Linear") {
        targets.emplace_back(std::nullopt);
        continue;
      }
      auto p = ModulePattern::Parse(t);
      if (!p.ok()) {
        Add(FindingCode::kTargetInvalidRegex, t, "config.json", p.status().message(),
            "fix the pattern (Python re syntax)");
      } else {
        targets.emplace_back(std::move(p).value());
      }
    }
    targets_.push_back(std::move(targets));
    const QuantScheme* row = g.weights ? FindSchemeFor(*g.weights) : nullptr;
    // A registry row with activation arguments (W8A8, FP8, W4AFP8) is checked as that row.
    if (g.has_input_activations && (row == nullptr || row->input_activations.empty())) {
      Add(FindingCode::kNotWeightOnly, g.name, "config.json",
          "the group quantizes activations too; only weight-only schemes are checked in full", "");
    }
    if (!g.weights) continue;
    const WeightQuantArgs& w = *g.weights;
    labels.push_back(SchemeLabel(w));
    const QuantScheme* scheme = FindSchemeFor(w);
    bool known_bits = scheme != nullptr;
    // A row of the registry in another format (FP8 blocks, NVFP4 tensor groups) has that
    // format's strategies; format-not-checked above says its tensors are not verified yet.
    bool other_format = scheme != nullptr && scheme->codec != &PackQuantizedCodec();
    bool known_strategy = w.strategy == "group" || w.strategy == "channel" || other_format;
    if (!known_bits || !known_strategy) {
      Add(FindingCode::kUnknownScheme, g.name, "config.json",
          fmt::format("weights type '{}' num_bits {} strategy '{}' is not an integer W2A16..W8A16 "
                      "scheme vLLM's WNA16 path runs",
                      w.type, w.num_bits, w.strategy),
          "use type int, num_bits 2 to 8, strategy group or channel");
    }
    if (w.strategy == "group") {
      int64_t gs = w.group_size.value_or(0);
      if (gs == kChannelWise || !IsKernelGroupSize(gs)) {
        Add(FindingCode::kGroupSizeUnsupported, g.name, "config.json",
            fmt::format("group_size {} has no vLLM (Marlin) kernel", gs),
            "requantize with group size 32, 64, 128 or channel-wise");
      }
    }
    if (scheme != nullptr && scheme->codec == &PackQuantizedCodec() &&
        !StockVllmRunsWidth(w.num_bits)) {
      const std::string type = VllmWnaType(w.num_bits, w.symmetric);
      AddWna16KernelFinding(
          FindingCode::kNoVllmKernel, g.name, "config.json",
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
      Add(FindingCode::kAsymInt8NoMarlin, g.name, "config.json",
          "asymmetric int8 never runs on Marlin; vLLM falls back to a slower kernel or fails",
          "use symmetric int8 (w8a16)");
    }
  }
  for (const std::string& key : qc_->unknown_weight_keys) {
    // A key set to a value changes what newer releases do and fails older ones: an error. Set to
    // null (llm-compressor 0.13+ writes "scale_dtype": null) it only fails the old releases.
    bool set = false;
    for (const auto& [name, group] : config_.json["quantization_config"]["config_groups"].items()) {
      if (group.contains("weights") && group["weights"].is_object() &&
          group["weights"].contains(key) && !group["weights"][key].is_null()) {
        set = true;
      }
    }
    // model_free_ptq itself writes these keys for the other formats and the 2/3/5/6/7-bit widths,
    // so an install that loads its checkpoints reads them; only the 4/8-bit pack-quantized rows,
    // where sparkulator leaves them out, are judged.
    const bool format_needs_keys = scheme_ && WritesReferenceConfig(*scheme_->scheme);
    if (format_needs_keys) continue;
    Add(FindingCode::kQuantArgsKey, set ? Severity::kError : Severity::kWarning, key, "config.json",
        fmt::format("QuantizationArgs key '{}'{} is rejected by older compressed-tensors "
                    "releases (\"extra fields not permitted\"), so vLLM installs with them fail "
                    "to load the checkpoint",
                    key, set ? "" : " (null)"),
        fmt::format("remove '{}' from config_groups.*.weights (docs/formats.md 2.2)", key));
  }
  auto ignore = ParsePatterns(qc_->ignore, "ignore");
  if (!ignore.ok()) {
    Add(FindingCode::kIgnoreInvalidRegex, "", "config.json", ignore.status().message(),
        "fix the pattern (Python re syntax)");
  } else {
    ignore_ = std::move(ignore).value();
  }
  report_.scheme =
      labels.empty() ? "compressed-tensors" : fmt::format("{}", fmt::join(labels, ", "));
}

}  // namespace spk::check_internal
