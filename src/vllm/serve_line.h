// The `vllm serve` command line that fits a checkpoint, as docs/vllm.md ("Serving") gives it for
// each family: a draft is served beside its target with a --speculative-config, MTP layers inside
// their own model, a plain LLM alone (or beside a target as vLLM's method="draft_model" draft:
// DraftModelServeLine). The method is the one vLLM's module map gives the architecture
// (FamilyDetection::vllm_method: dspark, eagle, ...) when it knows it, else the family's. inspect,
// quantize --json and check print it.
//
// A pure function over values; thread-safe. No errors: every family has a line.
#pragma once

#include <string>

#include "vllm/family.h"

namespace spk {

// The line for a checkpoint of `family` at `path`, served with `target` (drafts), with the draft's
// num_speculative_tokens (FamilyDetection).
std::string ServeLine(const FamilyDetection& family, const std::string& path,
                      const std::string& target);

// A plain causal LM at `path` served as the draft of `target` (vLLM's method "draft_model"), with
// kDraftModelTokens speculative tokens.
inline constexpr int kDraftModelTokens = 3;  // a small draft's usual start; tune with `bench`
std::string DraftModelServeLine(const std::string& path, const std::string& target);

}  // namespace spk
