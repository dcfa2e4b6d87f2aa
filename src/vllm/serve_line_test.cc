// ServeLine: one line per family, as docs/vllm.md ("Serving") gives them. The end-to-end suites
// serve these lines on vLLM; this pins their text.
#include "vllm/serve_line.h"

#include <gtest/gtest.h>

namespace spk {
namespace {

FamilyDetection Family(ModelFamily family, int tokens) {
  FamilyDetection f;
  f.family = family;
  f.num_speculative_tokens = tokens;
  return f;
}

TEST(ServeLineTest, DFlashDraftIsServedBesideItsTarget) {
  EXPECT_EQ(ServeLine(Family(ModelFamily::kDFlash, 15), "/d", "Qwen/Qwen3-8B"),
            "vllm serve Qwen/Qwen3-8B --max-num-seqs 4 --max-num-batched-tokens 8192 "
            "--speculative-config "
            "'{\"method\":\"dflash\",\"model\":\"/d\",\"num_speculative_tokens\":15}'");
}

TEST(ServeLineTest, Eagle3HeadIsServedBesideItsTarget) {
  EXPECT_EQ(ServeLine(Family(ModelFamily::kEagle3, 3), "/e", "<target>"),
            "vllm serve <target> --speculative-config "
            "'{\"method\":\"eagle3\",\"model\":\"/e\",\"num_speculative_tokens\":3}'");
}

TEST(ServeLineTest, MtpServesTheModelItselfAndLlmServesAlone) {
  EXPECT_EQ(
      ServeLine(Family(ModelFamily::kMtp, 1), "/m", "ignored"),
      "vllm serve /m --speculative-config '{\"method\":\"mtp\",\"num_speculative_tokens\":1}'");
  EXPECT_EQ(ServeLine(Family(ModelFamily::kLlm, 0), "/l", "ignored"), "vllm serve /l");
}

}  // namespace
}  // namespace spk
