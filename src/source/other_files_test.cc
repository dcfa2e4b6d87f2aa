// ListOtherFiles and CopyOtherFiles on real folders: what is copied byte for byte (sub-folders
// included), what is left to the writers (config, index, shards) or skipped like model_free_ptq
// skips it (.cache/, .gitattributes), and which links are followed or refused, and why.
#include "source/other_files.h"

#include <gtest/gtest.h>

#include <filesystem>

#include <cerrno>

#include "io/fault_injection.h"
#include "io/fs_util.h"
#include "io/test_util.h"

namespace spk {
namespace {

namespace fs = std::filesystem;

void Write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  ASSERT_TRUE(WriteWholeFile(path, text).ok()) << path;
}

CheckpointWriter WriterTo(const std::string& dst) {
  return CheckpointWriter(FileSystem::Default(), CheckpointWriterOptions::For(
                                                     dst, false, 1, Durability::kPageCache, false));
}

// The names CopyOtherFiles declares for `src`, expecting success; with `dst`, also copies them.
std::vector<std::string> Copy(const std::string& src, const std::string& dst,
                              std::vector<std::string>* warnings = nullptr) {
  std::vector<std::string> ignored;
  CheckpointWriter out = WriterTo(dst);
  auto names = CopyOtherFiles(FileSystem::Default(), src, &out, warnings ? warnings : &ignored);
  EXPECT_TRUE(names.ok()) << names.status().message();
  EXPECT_TRUE(out.Finish().ok()) << out.status().message();
  return names.ok() ? *names : std::vector<std::string>{};
}

// The message of a walk that must fail with InvalidInput; nothing is written.
std::string Refusal(const std::string& src, const std::string& dst) {
  std::vector<std::string> warnings;
  CheckpointWriter out = WriterTo(dst);
  auto names = CopyOtherFiles(FileSystem::Default(), src, &out, &warnings);
  EXPECT_FALSE(names.ok());
  if (names.ok()) return "";
  EXPECT_EQ(names.status().code(), StatusCode::kInvalidInput);
  out.Abandon();
  EXPECT_FALSE(fs::exists(dst));
  return names.status().message();
}

TEST(OtherFilesTest, CopiesEverythingButWhatTheWritersProduceSubFoldersIncluded) {
  spk::testing::ScopedTempDir dir;
  const std::string src = dir / "src", dst = dir / "dst";
  for (const char* name :
       {"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
        "tokenizer.json", "README.md", "1_Pooling/config.json", "2_Dense/model.safetensors",
        "code/layers/attention.py", ".gitattributes", ".cache/huggingface/x",
        "hf_quant_config.json", "quantize_config.json", "quant_config.json",
        "sub/quantize_config.json"}) {
    Write(src + "/" + name, std::string("bytes of ") + name);
  }
  std::vector<std::string> warnings;
  // Sub-folders keep their config.json and *.safetensors: only the top level's are the model's.
  EXPECT_EQ(Copy(src, dst, &warnings),
            (std::vector<std::string>{"1_Pooling/config.json", "2_Dense/model.safetensors",
                                      "README.md", "code/layers/attention.py",
                                      "sub/quantize_config.json", "tokenizer.json"}));
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(ReadWholeFile(dst + "/code/layers/attention.py").value(),
            "bytes of code/layers/attention.py");
  EXPECT_EQ(ReadWholeFile(dst + "/2_Dense/model.safetensors").value(),
            "bytes of 2_Dense/model.safetensors");
  EXPECT_FALSE(FileExists(dst + "/config.json"));
  EXPECT_FALSE(FileExists(dst + "/model-00001-of-00002.safetensors"));
  EXPECT_FALSE(FileExists(dst + "/.gitattributes"));
  // The source's quantization, as ModelOpt, AutoGPTQ and AutoAWQ describe it beside config.json.
  EXPECT_FALSE(FileExists(dst + "/hf_quant_config.json"));
  EXPECT_FALSE(FileExists(dst + "/quantize_config.json"));
  EXPECT_FALSE(FileExists(dst + "/quant_config.json"));
  EXPECT_FALSE(fs::exists(dst + "/.cache"));
}

TEST(OtherFilesTest, FollowsALinkInsideTheSourceAndCopiesItsBytes) {
  spk::testing::ScopedTempDir dir;
  const std::string src = dir / "src", dst = dir / "dst";
  Write(src + "/real/tokenizer.json", "tok");
  fs::create_symlink("real/tokenizer.json", src + "/tokenizer.json");
  fs::create_directory_symlink("real", src + "/alias");
  EXPECT_EQ(Copy(src, dst), (std::vector<std::string>{"alias/tokenizer.json", "real/tokenizer.json",
                                                      "tokenizer.json"}));
  EXPECT_FALSE(fs::is_symlink(dst + "/tokenizer.json"));
  EXPECT_EQ(ReadWholeFile(dst + "/tokenizer.json").value(), "tok");
  EXPECT_EQ(ReadWholeFile(dst + "/alias/tokenizer.json").value(), "tok");
}

TEST(OtherFilesTest, RefusesALinkOutOfTheSourceNamingItAndItsTarget) {
  spk::testing::ScopedTempDir dir;
  const std::string src = dir / "src";
  Write(dir / "secret.txt", "not the model's");
  Write(src + "/README.md", "readme");
  fs::create_directories(src + "/sub");
  fs::create_symlink(dir / "secret.txt", src + "/sub/leak.txt");
  const std::string message = Refusal(src, dir / "dst");
  EXPECT_NE(
      message.find(src + "/sub/leak.txt: a link to " + fs::canonical(dir / "secret.txt").string() +
                   ", outside the source folder " + fs::canonical(src).string()),
      std::string::npos)
      << message;

  fs::remove(src + "/sub/leak.txt");
  fs::create_directory_symlink(dir.path(), src + "/sub/up");  // a folder outside: refused too
  EXPECT_NE(Refusal(src, dir / "dst").find("sub/up: a link to"), std::string::npos);
}

TEST(OtherFilesTest, RefusesADanglingLinkAndALoop) {
  spk::testing::ScopedTempDir dir;
  const std::string src = dir / "src";
  Write(src + "/README.md", "readme");
  fs::create_symlink("gone.json", src + "/tokenizer.json");
  EXPECT_NE(
      Refusal(src, dir / "dst").find("tokenizer.json: a link to gone.json, which does not exist"),
      std::string::npos);
  fs::remove(src + "/tokenizer.json");
  fs::create_directories(src + "/sub");
  fs::create_directory_symlink("..", src + "/sub/loop");
  EXPECT_NE(Refusal(src, dir / "dst").find("(a loop)"), std::string::npos);
}

TEST(OtherFilesTest, AHuggingFaceCacheSnapshotMayLinkIntoItsBlobs) {
  spk::testing::ScopedTempDir dir;
  const std::string repo = dir / "models--org--name";
  const std::string snapshot = repo + "/snapshots/0123abcd";
  Write(repo + "/blobs/5f3e", "tokenizer bytes");
  fs::create_directories(snapshot + "/1_Pooling");
  fs::create_symlink("../../blobs/5f3e", snapshot + "/tokenizer.json");
  fs::create_symlink("../../../blobs/5f3e", snapshot + "/1_Pooling/config.json");
  EXPECT_EQ(Copy(snapshot, dir / "dst"),
            (std::vector<std::string>{"1_Pooling/config.json", "tokenizer.json"}));
  EXPECT_EQ(ReadWholeFile(dir / "dst/1_Pooling/config.json").value(), "tokenizer bytes");
  // The same links from a folder that is not a cache snapshot lead out of it.
  fs::rename(repo + "/snapshots", repo + "/copies");
  EXPECT_NE(Refusal(repo + "/copies/0123abcd", dir / "dst2").find("outside the source folder"),
            std::string::npos);
}

TEST(OtherFilesTest, MissingSourceIsNotFound) {
  spk::testing::ScopedTempDir dir;
  std::vector<std::string> warnings;
  CheckpointWriter out = WriterTo(dir / "dst");
  auto copied = CopyOtherFiles(FileSystem::Default(), dir / "absent", &out, &warnings);
  ASSERT_FALSE(copied.ok());
  EXPECT_EQ(copied.status().code(), StatusCode::kNotFound);
  EXPECT_NE(copied.status().message().find("absent"), std::string::npos);
}

TEST(OtherFilesTest, AFailedListingOrLinkResolutionFailsTheRunNamingItAndWritesNothing) {
  spk::testing::ScopedTempDir dir;
  const std::string src = dir / "src", dst = dir / "dst";
  Write(src + "/real/tokenizer.json", "tok");
  fs::create_symlink("real/tokenizer.json", src + "/tokenizer.json");
  for (FileOp op : {FileOp::kResolve, FileOp::kList}) {
    FaultInjectingFileSystem faulty(FileSystem::Default());
    faulty.FailOperation(op, op == FileOp::kList ? "real" : "tokenizer.json", EIO);
    std::vector<std::string> warnings;
    CheckpointWriter out = WriterTo(dst);
    auto names = CopyOtherFiles(&faulty, src, &out, &warnings);
    ASSERT_FALSE(names.ok());
    EXPECT_EQ(names.status().code(), StatusCode::kIoError);
    EXPECT_NE(names.status().message().find(op == FileOp::kList ? src + "/real"
                                                                : src + "/tokenizer.json"),
              std::string::npos)
        << names.status().message();
    out.Abandon();
    EXPECT_FALSE(fs::exists(dst));
  }
}

}  // namespace
}  // namespace spk
