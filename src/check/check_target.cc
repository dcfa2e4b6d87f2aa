// The rule target-pairing: the draft against --target's config.json (read by LoadCheckView).
#include "check/check_rules.h"

namespace spk::check_internal {

void TargetPairing(const CheckView& v, FindingSink& sink) {
  if (!v.target) return;
  const ModelConfig& target = v.target->config;
  const ModelConfig& config = v.config;
  auto mismatch = [&](FixedCode code, const char* what, std::optional<int64_t> draft,
                      std::optional<int64_t> tgt, const char* fix) {
    if (draft && tgt && *draft != *tgt) {
      sink.Add(code, "", "config.json",
               fmt::format("the draft's {} is {}, the target's is {}", what, *draft, *tgt), fix);
    }
  };
  mismatch(FindingCode::kTargetHiddenSize, "hidden_size", config.hidden_size, target.hidden_size,
           "use the draft built for this target");
  mismatch(FindingCode::kTargetVocabSize, "vocab_size", config.vocab_size, target.vocab_size,
           "use the draft built for this target (it shares the target's lm_head and tokenizer)");
  mismatch(FindingCode::kTargetLayerCount, "num_target_layers", config.num_target_layers,
           target.num_hidden_layers,
           "use the draft built for this target (vLLM's names of the draft's layers follow the "
           "target's layer count)");
  if (target.num_hidden_layers) {
    for (int64_t id : config.dflash_target_layer_ids) {
      if (id < 0 || id >= *target.num_hidden_layers) {
        sink.Add(
            FindingCode::kTargetLayerIds, "", "config.json",
            fmt::format("dflash_config.target_layer_ids holds {}, but the target has {} layers", id,
                        *target.num_hidden_layers),
            "use the draft built for this target");
      }
    }
  }
  // The precision the draft was calibrated against: recorded by the producer when known
  // (config.json "sparkulator".target_precision), else the unquantized target drafts are
  // published for. A record no spelling reads (another tool's words) is judged by whether it says
  // unquantized.
  std::string expected_text = "unquantized";
  auto rec = config.json.find("sparkulator");
  if (rec != config.json.end() && rec->is_object() && rec->contains("target_precision") &&
      (*rec)["target_precision"].is_string()) {
    expected_text = (*rec)["target_precision"].get<std::string>();
  }
  Result<TargetPrecision> parsed = ParseTargetPrecision(expected_text);
  TargetPrecision expected;
  if (parsed.ok()) {
    expected = *parsed;
  } else {
    expected.quantized = !expected_text.starts_with("unquantized");
  }
  if (!v.target->precision.Satisfies(expected)) {
    sink.Add(
        FindingCode::kTargetPrecisionMismatch, "", "config.json",
        fmt::format("the draft was built for a {} target, this target is {} ({}): acceptance can "
                    "drop to ~0% while output stays correct (a silent slowdown)",
                    expected_text, v.target->precision.Name(), v.target->label),
        "pair the draft with the target precision it was calibrated for");
  }
}

}  // namespace spk::check_internal
