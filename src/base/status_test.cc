#include "base/status.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "base/test_util.h"

namespace spk {
namespace {

Result<int> ParsePositive(int v) {
  if (v <= 0) return Status::InvalidInput("not positive");
  return v;
}

Status Doubled(int v, int* out) {
  SPK_ASSIGN_OR_RETURN(int x, ParsePositive(v));
  *out = 2 * x;
  return Status::Ok();
}

TEST(StatusTest, ExitCodesFollowDesign) {
  EXPECT_EQ(ExitCodeFor(Status::Ok()), 0);
  EXPECT_EQ(ExitCodeFor(Status::InvalidInput("x")), 2);
  EXPECT_EQ(ExitCodeFor(Status::Usage("x")), 2);
  EXPECT_EQ(ExitCodeFor(Status::NotFound("x")), 2);
  EXPECT_EQ(ExitCodeFor(Status::IoError("x")), 3);
}

TEST(StatusTest, ContextIsPrepended) {
  Status s = Status::IoError("disk full").WithContext("out/model.safetensors");
  EXPECT_EQ(s.message(), "out/model.safetensors: disk full");
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_TRUE(Status::Ok().WithContext("x").ok());
}

TEST(ResultTest, AssignOrReturnPropagates) {
  int out = 0;
  EXPECT_TRUE(Doubled(4, &out).ok());
  EXPECT_EQ(out, 8);
  Status s = Doubled(-1, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_EQ(s.message(), "not positive");
}

TEST(ExpectErrorTest, PassesOnTheCodeAndAPartOfTheMessage) {
  test_util::ExpectError(Status::NotFound("x.json: no such file"), StatusCode::kNotFound, "x.json");
  test_util::ExpectError(ParsePositive(0), StatusCode::kInvalidInput, "positive");
}

TEST(ExpectErrorTest, FailsOnAnotherCodeAnotherMessageOrSuccess) {
  EXPECT_NONFATAL_FAILURE(
      test_util::ExpectError(Status::IoError("x.json"), StatusCode::kNotFound, "x.json"),
      "actual: kIoError: \"x.json\"");
  EXPECT_NONFATAL_FAILURE(
      test_util::ExpectError(Status::NotFound("y.json"), StatusCode::kNotFound, "x.json"),
      "containing \"x.json\"");
  EXPECT_NONFATAL_FAILURE(test_util::ExpectError(ParsePositive(1), StatusCode::kInvalidInput, ""),
                          "actual: kOk");
}

}  // namespace
}  // namespace spk
