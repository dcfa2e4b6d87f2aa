#include "base/json_at.h"

#include <gtest/gtest.h>

namespace spk {
namespace {

using nlohmann::json;

const json kDoc = json::parse(R"({
  "arms": [{"name": "bf16", "n": 3}, {"name": 7, "n": -1, "rate": null}],
  "flag": true, "none": "none", "count": 1.5
})");

TEST(JsonAt, ReadsWhatIsThere) {
  JsonAt doc(kDoc, "B.json");
  EXPECT_EQ(*doc.Key("arms").Index(0).Key("name").String(), "bf16");
  EXPECT_EQ(*doc.Key("arms").Index(0).Key("n").Count(), 3u);
  EXPECT_EQ(*doc.Key("arms").Index(0).Key("n").Number(), 3.0);
  EXPECT_EQ(*doc.Key("arms").Array(), 2u);
  EXPECT_TRUE(*doc.Key("flag").Bool());
  EXPECT_TRUE(doc.Object().ok());
  EXPECT_EQ(doc.Key("arms").Index(1).Key("rate").NumberOrNull()->has_value(), false);
  EXPECT_EQ(doc.Key("arms").Index(1).Key("absent").NumberOrNull()->has_value(), false);
  EXPECT_EQ(**doc.Key("arms").Index(0).Key("n").NumberOrNull(), 3.0);
  EXPECT_TRUE(doc.Key("nothing").missing());
  EXPECT_EQ(doc.Key("arms").Index(1).Key("name").path(), "arms[1].name");
}

TEST(JsonAt, AWrongTypeNamesFileAndPath) {
  JsonAt doc(kDoc, "B.json");
  Status s = doc.Key("arms").Index(1).Key("name").String().status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_EQ(s.message(), "B.json: arms[1].name: expected a string, got a number");
  EXPECT_EQ(doc.Key("flag").Number().status().message(),
            "B.json: flag: expected a number, got a boolean");
  EXPECT_EQ(doc.Key("arms").Object().message(), "B.json: arms: expected an object, got an array");
  EXPECT_EQ(doc.Key("none").NumberOrNull().status().message(),
            "B.json: none: expected a number or null, got a string");
  EXPECT_EQ(JsonAt(json::array(), "B.json").Object().message(),
            "B.json: expected an object, got an array");
}

TEST(JsonAt, AMissingFieldIsNothing) {
  JsonAt doc(kDoc, "B.json");
  EXPECT_EQ(doc.Key("arms").Index(0).Key("spec").Bool().status().message(),
            "B.json: arms[0].spec: expected a boolean, got nothing");
  EXPECT_EQ(doc.Key("arms").Index(2).Object().message(),
            "B.json: arms[2]: expected an object, got nothing");
  EXPECT_EQ(doc.Key("arms").Index(1).Key("rate").Bool().status().message(),
            "B.json: arms[1].rate: expected a boolean, got null");
}

TEST(JsonAt, AParentOfTheWrongKindIsReportedAtTheParent) {
  JsonAt doc(kDoc, "B.json");
  EXPECT_EQ(doc.Key("none").Index(0).Key("name").String().status().message(),
            "B.json: none: expected an array, got a string");
  EXPECT_EQ(doc.Key("flag").Key("x").NumberOrNull().status().message(),
            "B.json: flag: expected an object, got a boolean");
  EXPECT_EQ(doc.Key("absent").Key("x").Count().status().message(),
            "B.json: absent: expected an object, got nothing");
}

TEST(JsonAt, ACountIsAnIntegerAtLeastZero) {
  JsonAt doc(kDoc, "B.json");
  EXPECT_EQ(doc.Key("arms").Index(1).Key("n").Count().status().message(),
            "B.json: arms[1].n: expected an integer >= 0, got -1");
  EXPECT_EQ(doc.Key("count").Count().status().message(),
            "B.json: count: expected an integer >= 0, got 1.5");
  EXPECT_EQ(doc.Key("none").Count().status().message(),
            "B.json: none: expected an integer >= 0, got a string");
  EXPECT_EQ(doc.Error("arms[1].cells: 2 cells, arms[0] has 3").message(),
            "B.json: arms[1].cells: 2 cells, arms[0] has 3");
}

}  // namespace
}  // namespace spk
