// MakeCard reads through the FileSystem it is handed: a config.json that exists only in a wrapper's
// memory is the one it reads, and a record whose scheme has no row of the scheme table is refused.
#include "card/card.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <map>

#include "io/fault_injection.h"
#include "io/test_util.h"

namespace spk::card {
namespace {

// The default file system, with some files that exist only in memory.
class InMemoryFiles : public FileSystemWrapper {
 public:
  InMemoryFiles() : FileSystemWrapper(FileSystem::Default()) {}
  std::map<std::string, std::string> files;

  Result<std::string> ReadFile(const std::string& path) override {
    auto it = files.find(path);
    if (it == files.end()) return Status::NotFound("in memory: no " + path);
    return it->second;
  }
  FileKind KindOf(const std::string& path) override {
    return files.count(path) ? FileKind::kFile : FileKind::kMissing;
  }
};

TEST(MakeCard, ReadsTheCheckpointThroughItsFileSystem) {
  InMemoryFiles fs;
  CardOptions options;
  options.checkpoint = "/no/such/ckpt";
  auto missing = MakeCard(RunContext{.fs = &fs}, options, "");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("in memory: no /no/such/ckpt/config.json"),
            std::string::npos)
      << missing.status().message();

  fs.files["/no/such/ckpt/config.json"] =
      R"({"quantization_config": {}, "sparkulator": {"scheme": "w9a16"}})";
  auto unknown = MakeCard(RunContext{.fs = &fs}, options, "");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(unknown.status().message().find("/no/such/ckpt/config.json"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("\"w9a16\""), std::string::npos);
  EXPECT_NE(unknown.status().message().find("fp8-block"), std::string::npos);  // the known ones
}

// A record field of the wrong type is an input error naming config.json and the field, before
// anything else reads the checkpoint (nlohmann's typed reads would throw type_error instead).
TEST(MakeCard, ARecordFieldOfTheWrongTypeNamesTheFileAndTheField) {
  const std::map<std::string, std::string> cases = {
      {R"("group_size": "x")", "sparkulator.group_size: expected a number, got a string"},
      {R"("group_size": 12.5)", "sparkulator.group_size: expected an integer, got 12.5"},
      {R"("source": 7)", "sparkulator.source: expected a string, got a number"},
      {R"("target_precision": null)", "sparkulator.target_precision: expected a string, got null"},
      {R"("data_free": "yes")", "sparkulator.data_free: expected a boolean, got a string"},
      {R"("source_tensor_bytes": -1)",
       "sparkulator.source_tensor_bytes: expected an integer >= 0, got -1"},
      {R"("output_tensor_bytes": [])",
       "sparkulator.output_tensor_bytes: expected an integer >= 0, got an array"},
      {R"("kept_dense": {})", "sparkulator.kept_dense: expected an array, got an object"},
      {R"("kept_dense": [{"reason": "r", "tensor": "t"}, "t"])",
       "sparkulator.kept_dense[1]: expected an object, got a string"},
      {R"("kept_dense": [{"reason": 3, "tensor": "t"}])",
       "sparkulator.kept_dense[0].reason: expected a string, got a number"},
  };
  for (const auto& [field, message] : cases) {
    InMemoryFiles fs;
    fs.files["/ckpt/config.json"] = R"({"quantization_config": {"ignore": 5}, "sparkulator": )"
                                    R"({"scheme": "w4a16", )" +
                                    field + "}}";
    CardOptions options;
    options.checkpoint = "/ckpt";
    auto card = MakeCard(RunContext{.fs = &fs}, options, "");
    ASSERT_FALSE(card.ok()) << field;
    EXPECT_EQ(card.status().code(), StatusCode::kInvalidInput) << field;
    EXPECT_EQ(card.status().message(), "/ckpt/config.json: " + message) << field;
  }
}

TEST(MakeCard, AFailedReadNamesTheFile) {
  spk::testing::ScopedTempDir dir;
  ASSERT_TRUE(FileSystem::Default()->WriteFile(dir / "config.json", "{}").ok());
  FaultInjectingFileSystem fs(FileSystem::Default());
  fs.FailOperation(FileOp::kRead, "config.json", EIO);
  CardOptions options;
  options.checkpoint = dir.path();
  auto card = MakeCard(RunContext{.fs = &fs}, options, "");
  ASSERT_FALSE(card.ok());
  EXPECT_EQ(card.status().code(), StatusCode::kIoError);
  EXPECT_NE(card.status().message().find("cannot read " + (dir / "config.json")), std::string::npos)
      << card.status().message();
}

}  // namespace
}  // namespace spk::card
