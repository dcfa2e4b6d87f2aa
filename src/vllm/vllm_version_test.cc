#include "vllm/vllm_version.h"

#include <gtest/gtest.h>

namespace spk {
namespace {

VllmVersion V(std::string_view text) {
  auto v = ParseVllmVersion(text);
  EXPECT_TRUE(v.ok()) << text;
  return *v;
}

TEST(VllmVersion, ParsesReleasesLocalLabelsAndPrereleases) {
  EXPECT_EQ(CompareVllmVersions(V("0.32.0+cpu"), V("0.32.0")), 0);
  EXPECT_LT(CompareVllmVersions(V("0.26.1rc1.dev1049+gf8e060271"), V("0.26.1")), 0);
  EXPECT_GT(CompareVllmVersions(V("0.26.1rc1.dev1049+gf8e060271"), V("0.26.0")), 0);
  EXPECT_LT(CompareVllmVersions(V("v0.25.1"), V("0.32")), 0);
  EXPECT_EQ(V("0.32").patch, 0);
  EXPECT_EQ(ParseVllmVersion("latest").status().message(),
            "'latest' is not a vLLM version (use MAJOR.MINOR[.PATCH], e.g. 0.32.0)");
  EXPECT_EQ(ParseVllmVersion("7").status().code(), StatusCode::kUsage);
}

TEST(VllmVersion, ABuildBelongsToItsRelease) {
  EXPECT_EQ(V("0.34.0rc1.dev3+g1a2b").release(), "0.34.0");
  EXPECT_EQ(V("v0.33.0").release(), "0.33.0");
  EXPECT_EQ(V("0.32").release(), "0.32.0");
  EXPECT_EQ(CompareVllmReleases(V("0.34.0rc1"), V("0.34.0")), 0);
  EXPECT_LT(CompareVllmVersions(V("0.34.0rc1"), V("0.34.0")), 0);
  EXPECT_GT(CompareVllmReleases(V("0.33.1"), V("0.33.0+cpu")), 0);
}

}  // namespace
}  // namespace spk
