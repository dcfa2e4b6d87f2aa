#include "vllm/serve_line.h"

#include <fmt/format.h>

namespace spk {

std::string ServeLine(const FamilyDetection& family, const std::string& path,
                      const std::string& target) {
  const int k = family.num_speculative_tokens;
  if (family.map_draft || (!family.vllm_method.empty() && family.vllm_method != "mtp")) {
    // The method vLLM's module map gives the architecture (dspark, eagle, dflash, eagle3, ...),
    // also where the tensor names look like MTP layers (DeepSeek-V4 DSpark's mtp.N.*).
    const bool dflash_like = family.family == ModelFamily::kDFlash;
    std::string fields;
    for (const auto& [key, value] : family.speculative_config_fields) {
      fields += fmt::format(",\"{}\":{}", key, value);
    }
    return fmt::format(
        "vllm serve {} {}--speculative-config "
        "'{{\"method\":\"{}\",\"model\":\"{}\",\"num_speculative_tokens\":{}{}}}'",
        target, dflash_like ? "--max-num-seqs 4 --max-num-batched-tokens 8192 " : "",
        family.vllm_method, path, k, fields);
  }
  switch (family.family) {
    case ModelFamily::kDFlash:
      return fmt::format(
          "vllm serve {} --max-num-seqs 4 --max-num-batched-tokens 8192 --speculative-config "
          "'{{\"method\":\"dflash\",\"model\":\"{}\",\"num_speculative_tokens\":{}}}'",
          target, path, k);
    case ModelFamily::kEagle3:
      return fmt::format(
          "vllm serve {} --speculative-config "
          "'{{\"method\":\"eagle3\",\"model\":\"{}\",\"num_speculative_tokens\":{}}}'",
          target, path, k);
    case ModelFamily::kMtp:
      return fmt::format(
          "vllm serve {} --speculative-config "
          "'{{\"method\":\"mtp\",\"num_speculative_tokens\":{}}}'",
          path, k);
    case ModelFamily::kLlm:
      return fmt::format("vllm serve {}", path);
  }
  return "";
}

std::string DraftModelServeLine(const std::string& path, const std::string& target) {
  return fmt::format(
      "vllm serve {} --speculative-config "
      "'{{\"method\":\"draft_model\",\"model\":\"{}\",\"num_speculative_tokens\":{}}}'",
      target, path, kDraftModelTokens);
}

}  // namespace spk
