// Checker parts: the draft/target pairing (--target).
#include "check/checker.h"

#include "checkpoint/serve_line.h"
#include "checkpoint/source.h"
#include "quant/scheme.h"

namespace spk::check_internal {

namespace {

// "w4a16 (group 128)"-like label of a config's quantization, or "unquantized (<dtype>)".
std::string PrecisionOf(const ModelConfig& config) {
  if (!config.has_quantization_config) {
    return fmt::format("unquantized ({})",
                       config.torch_dtype.empty() ? "dtype unknown" : config.torch_dtype);
  }
  auto qc = ParseQuantizationConfig("config.json", config.json);
  if (!qc.ok()) return "quantized (unreadable quantization_config)";
  for (const ConfigGroup& g : qc->groups) {
    if (g.weights) return qc->quant_method + " " + SchemeLabel(*g.weights);
  }
  const auto& q = config.json["quantization_config"];
  return q.contains("quant_method") && q["quant_method"].is_string()
             ? q["quant_method"].get<std::string>()
             : "quantized";
}

}  // namespace

Status Checker::CheckTarget() {
  SPK_ASSIGN_OR_RETURN(std::string target_dir, ResolveModelPath(fs_, options_.target));
  std::string path = target_dir + "/config.json";
  SPK_ASSIGN_OR_RETURN(std::string text, fs_->ReadFile(path));
  SPK_ASSIGN_OR_RETURN(ModelConfig target, ParseModelConfig(path, text));
  auto mismatch = [&](FixedCode code, const char* what, std::optional<int64_t> draft,
                      std::optional<int64_t> tgt, const char* fix) {
    if (draft && tgt && *draft != *tgt) {
      Add(code, "", "config.json",
          fmt::format("the draft's {} is {}, the target's is {}", what, *draft, *tgt), fix);
    }
  };
  mismatch(FindingCode::kTargetHiddenSize, "hidden_size", config_.hidden_size, target.hidden_size,
           "use the draft built for this target");
  mismatch(FindingCode::kTargetVocabSize, "vocab_size", config_.vocab_size, target.vocab_size,
           "use the draft built for this target (it shares the target's lm_head and tokenizer)");
  mismatch(FindingCode::kTargetLayerCount, "num_target_layers", config_.num_target_layers,
           target.num_hidden_layers,
           "use the draft built for this target (vLLM's names of the draft's layers follow the "
           "target's layer count)");
  if (target.num_hidden_layers) {
    for (int64_t id : config_.dflash_target_layer_ids) {
      if (id < 0 || id >= *target.num_hidden_layers) {
        Add(FindingCode::kTargetLayerIds, "", "config.json",
            fmt::format("dflash_config.target_layer_ids holds {}, but the target has {} layers", id,
                        *target.num_hidden_layers),
            "use the draft built for this target");
      }
    }
  }
  // The precision the draft was calibrated against: recorded by the producer when known
  // (config.json "sparkulator".target_precision), else the unquantized target drafts are
  // published for.
  std::string expected = "unquantized";
  auto rec = config_.json.find("sparkulator");
  if (rec != config_.json.end() && rec->is_object() && rec->contains("target_precision") &&
      (*rec)["target_precision"].is_string()) {
    expected = (*rec)["target_precision"].get<std::string>();
  }
  std::string actual = PrecisionOf(target);
  target_precision_ = actual;
  bool expected_quantized = !expected.starts_with("unquantized");
  bool actual_quantized = target.has_quantization_config;
  if (expected_quantized != actual_quantized ||
      (expected_quantized && actual.find(expected) == std::string::npos)) {
    Add(FindingCode::kTargetPrecisionMismatch, "", "config.json",
        fmt::format("the draft was built for a {} target, this target is {}: acceptance can drop "
                    "to ~0% while output stays correct (a silent slowdown)",
                    expected, actual),
        "pair the draft with the target precision it was calibrated for");
  }
  report_.serve = ServedAsDraftModel() ? DraftModelServeLine(dir_, options_.target)
                                       : ServeLine(family_, dir_, options_.target);
  target_layers_ = target.num_hidden_layers;
  if (!config_.num_target_layers && !options_.target_layers) {
    options_.target_layers = target.num_hidden_layers;
  }
  return Status::Ok();
}

}  // namespace spk::check_internal
