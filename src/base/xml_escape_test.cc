#include "base/xml_escape.h"

#include <gtest/gtest.h>

namespace spk {
namespace {

TEST(EscapeXmlTest, EscapesMarkupAndQuotesOnly) {
  EXPECT_EQ(EscapeXml(R"(a<b & "c">d)"), "a&lt;b &amp; &quot;c&quot;&gt;d");
  EXPECT_EQ(EscapeXml("model.layers.0.mlp.up_proj"), "model.layers.0.mlp.up_proj");
  EXPECT_EQ(EscapeXml(""), "");
}

}  // namespace
}  // namespace spk
