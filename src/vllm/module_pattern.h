// Module-name patterns as compressed-tensors and vLLM read them in `ignore` and `targets`: either
// an exact name, or "re:<pattern>" applied with Python's re.match (anchored at the start of the
// name only).
//
// PCRE2 stands in for Python's `re`: the syntax used in practice ((?P<name>...), \d, classes,
// groups, alternation, $) means the same in both; Python's end anchor \Z is translated to PCRE2's
// \z. Ownership: a ModulePattern owns its compiled code (shared, immutable). Thread safety:
// Matches() may be called concurrently. Errors: Parse returns InvalidInput for a regex that does
// not compile.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace spk {

class ModulePattern {
 public:
  // `entry` as written in a config: "lm_head" or "re:.*self_attn\\.q_proj$".
  static Result<ModulePattern> Parse(std::string_view entry);

  // Python `re.match(pattern, name)` for regex entries, string equality otherwise.
  bool Matches(std::string_view module_name) const;

  const std::string& text() const { return text_; }  // the entry as written
  bool is_regex() const { return code_ != nullptr; }

 private:
  struct Code;
  std::string text_;
  std::shared_ptr<const Code> code_;
};

// Parses every entry; the first bad one is reported with its index.
Result<std::vector<ModulePattern>> ParsePatterns(const std::vector<std::string>& entries,
                                                 std::string_view what);

// `text` with every Python regex metacharacter escaped, for a "re:" entry that matches it
// literally.
std::string EscapeRegex(std::string_view text);

// True if any pattern matches (compressed-tensors `check_equal_or_regex_match`).
bool AnyMatches(const std::vector<ModulePattern>& patterns, std::string_view module_name);

// vLLM's packed_modules_mapping: fused module leaf name -> shard leaf names, e.g.
// "qkv_proj" -> {"q_proj", "k_proj", "v_proj"}.
using FusedMapping = std::map<std::string, std::vector<std::string>>;

// The mapping every Llama/Qwen-style model in vLLM declares: the packed_modules_mapping the newest
// module map recorded for its common targets (vllm/vllm_module_map.h: Llama, Qwen3), merged.
const FusedMapping& StandardFusedMapping();

// True for the leaf names of attention's fused q/k/v module and its shards (StandardFusedMapping's
// "qkv_proj": qkv_proj, q_proj, k_proj, v_proj).
bool IsQkvLeaf(std::string_view leaf);
// A module that is attention's q/k/v or their fused qkv_proj: an IsQkvLeaf leaf under a
// `self_attn` module ("model.layers.0.self_attn.k_proj").
bool IsAttentionQkv(std::string_view module);

struct IgnoreDecision {
  bool ignored = false;
  bool shards_disagree = false;  // some shards ignored, others not (vLLM error or silent dense)
};

// vLLM's `should_ignore_layer`
// (vllm/model_executor/layers/quantization/compressed_tensors/utils.py): a fused layer whose last
// name part is in `mapping` (and that is not itself listed literally) is decided shard by shard;
// any other layer by its own name.
IgnoreDecision DecideIgnore(std::string_view layer_name, const std::vector<ModulePattern>& ignore,
                            const FusedMapping& mapping);

}  // namespace spk
