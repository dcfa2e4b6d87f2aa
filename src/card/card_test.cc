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
