#include "card/front_matter.h"

#include <gtest/gtest.h>

#include "card/card.h"

namespace spk::card {
namespace {

OwnedKeys Keys() { return {"org/model", "apache-2.0", "w4a16", "dflash", "int4"}; }

TEST(MergeCard, NewCardHasFrontMatterAndTheGeneratedBlock) {
  std::string card = MergeCard("", Keys(), "# body\n");
  EXPECT_EQ(card.rfind("---\nbase_model: org/model\nbase_model_relation: quantized\n", 0), 0u)
      << card;
  EXPECT_NE(card.find("license: apache-2.0\n"), std::string::npos);
  EXPECT_NE(card.find("- speculative-decoding\n- dflash\n"), std::string::npos);
  EXPECT_NE(card.find(std::string(kGeneratedBegin) + "\n# body\n" + kGeneratedEnd),
            std::string::npos);
}

TEST(MergeCard, UpdateKeepsProseAndForeignKeysAndReplacesOnlyTheBlock) {
  std::string first = MergeCard("", Keys(), "# old numbers\n");
  std::string edited = first;
  edited.replace(edited.find("tags:"), 0, "datasets:\n- my/data\n");
  edited.insert(edited.find(kGeneratedBegin), "My own introduction.\n\n");
  edited += "\n## Citation\nPlease cite.\n";
  OwnedKeys no_license = Keys();
  no_license.license = "";  // unknown now: the card's earlier license stays
  std::string updated = MergeCard(edited, no_license, "# new numbers\n");
  EXPECT_EQ(updated.find("old numbers"), std::string::npos);
  EXPECT_NE(updated.find("# new numbers\n"), std::string::npos);
  EXPECT_NE(updated.find("My own introduction."), std::string::npos);
  EXPECT_NE(updated.find("## Citation\nPlease cite."), std::string::npos);
  EXPECT_NE(updated.find("datasets:\n- my/data\n"), std::string::npos);
  EXPECT_NE(updated.find("license: apache-2.0"), std::string::npos);
  EXPECT_EQ(updated.find("base_model_relation"), updated.rfind("base_model_relation"));
}

TEST(MergeCard, ACardWithoutMarkersKeepsItsProseAboveTheBlock) {
  std::string card = MergeCard("---\nlicense: mit\n---\n\nHand-written card.\n",
                               {"", "", "w4a16", "llm", "int4"}, "# generated\n");
  EXPECT_NE(card.find("license: mit\n"), std::string::npos);
  EXPECT_EQ(card.find("base_model:"), std::string::npos);  // unknown: left out
  EXPECT_LT(card.find("Hand-written card."), card.find(kGeneratedBegin));
  EXPECT_EQ(card.find("speculative-decoding"), std::string::npos);
}

// The number-type tag is the scheme row's (quant/scheme.h WeightNumberName), not a guess from the
// scheme's name: an FP8 checkpoint is not tagged int4 or int8.
TEST(MergeCard, TagsTheNumberTypeItIsGiven) {
  EXPECT_NE(MergeCard("", Keys(), "").find("- w4a16\n- int4\n- speculative-decoding\n"),
            std::string::npos);
  std::string fp8 = MergeCard("", {"a/b", "", "fp8-block", "llm", "fp8"}, "");
  EXPECT_NE(fp8.find("- fp8-block\n- fp8\n"), std::string::npos) << fp8;
  EXPECT_EQ(fp8.find("int4"), std::string::npos);
  EXPECT_EQ(fp8.find("int8"), std::string::npos);
  std::string unknown = MergeCard("", {"a/b", "", "w8a8", "llm", ""}, "");
  EXPECT_EQ(unknown.find("int8"), std::string::npos);  // no number type given: no tag guessed
}

TEST(FrontMatterScalar, ReadsAndUnquotes) {
  EXPECT_EQ(FrontMatterScalar("---\nlicense: \"other: see LICENSE\"\ntags:\n- a\n---\n", "license"),
            "other: see LICENSE");
  EXPECT_EQ(FrontMatterScalar("no front matter", "license"), "");
  std::string card = MergeCard("", {"a/b", "other: see LICENSE", "w4a16", "llm", "int4"}, "");
  EXPECT_NE(card.find("license: \"other: see LICENSE\"\n"), std::string::npos);
}

}  // namespace
}  // namespace spk::card
