// CheckpointWriter on real files: a sharded folder with its index, written files and copies, read
// back with our reader; the same bytes whatever the thread count; durability; and every failure
// (a producer bug, a layout error, a full disk at config.json, the index or a copy, Abandon) is
// sticky, names the file and tensor, and leaves neither DST nor a temporary folder behind.
#include "safetensors/checkpoint_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <map>
#include <string>
#include <vector>

#include "base/test_util.h"
#include "io/atomic_dir.h"
#include "io/fault_injection.h"
#include "io/fs_util.h"
#include "io/test_util.h"
#include "safetensors/checkpoint_files.h"

namespace spk {
namespace {

using ::testing::HasSubstr;

constexpr char kShard1[] = "model-00001-of-00002.safetensors";
constexpr char kShard2[] = "model-00002-of-00002.safetensors";

// Fills its one tensor of `n` bytes with byte k = (seed + k) & 0xff, in blocks of `block` bytes.
TensorProducer PatternProducer(uint64_t n, uint64_t block, int seed) {
  TensorProducer p;
  p.blocks = static_cast<size_t>((n + block - 1) / block);
  p.write_block = [=](size_t b, const TensorSink& out) {
    std::vector<uint8_t> bytes(std::min(block, n - b * block));
    for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<uint8_t>(seed + b * block + k);
    return out.Write(0, b * block, bytes);
  };
  return p;
}

// Two shards: "b.weight" (F32 [64, 32], in 8 blocks) and "a.norm" (BF16 [32]) in the first,
// "c.weight" (U8 [1000], with a finish step writing its last byte) in the second; config.json
// and a copy of `copy_from` (tokenizer.json) beside them.
void Declare(CheckpointWriter& w, const std::string& copy_from) {
  size_t s1 = w.AddShard(kShard1);
  size_t s2 = w.AddShard(kShard2);
  w.AddTensors(s1, {{"b.weight", DType::kF32, {64, 32}}}, PatternProducer(64 * 32 * 4, 1024, 1));
  w.AddTensors(s1, {{"a.norm", DType::kBF16, {32}}}, PatternProducer(64, 64, 2));
  TensorProducer c = PatternProducer(999, 100, 3);
  c.finish = [](const TensorSink& out) {
    const uint8_t last = 0xee;
    return out.Write(0, 999, {&last, 1});
  };
  w.AddTensors(s2, {{"c.weight", DType::kU8, {1000}}}, std::move(c));
  w.AddFile("config.json", "{\"architectures\": []}\n");
  w.AddCopy(copy_from, "tokenizer.json");
}

std::vector<std::string> Entries(const std::string& dir) { return *ListDirectory(dir); }

class CheckpointWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteWholeFile(dir_ / "tokenizer.json", "{\"model\": {}}").ok());
  }
  CheckpointWriterOptions Options(int threads = 2) {
    return CheckpointWriterOptions::For(dir_ / "out", false, threads, Durability::kSynced, true);
  }
  // Only the source file is left in the test folder: no DST, no temporary folder.
  void ExpectNothingLeft() {
    EXPECT_EQ(Entries(dir_.path()), std::vector<std::string>{"tokenizer.json"});
  }
  testing::ScopedTempDir dir_;
};

TEST_F(CheckpointWriterTest, WritesShardsIndexFilesAndCopies) {
  CheckpointWriter w(FileSystem::Default(), Options());
  Declare(w, dir_ / "tokenizer.json");
  ASSERT_TRUE(w.Finish().ok()) << w.status().message();
  const std::string out = dir_ / "out";
  EXPECT_EQ(Entries(out),
            (std::vector<std::string>{"config.json", kShard1, kShard2,
                                      "model.safetensors.index.json", "tokenizer.json"}));
  EXPECT_EQ(*ReadWholeFile(out + "/tokenizer.json"), "{\"model\": {}}");
  EXPECT_EQ(*ReadWholeFile(out + "/config.json"), "{\"architectures\": []}\n");
  auto ckpt = SafetensorsCheckpoint::Open(FileSystem::Default(), out);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();  // the index agrees with the shards
  EXPECT_EQ(ckpt->index()->total_size, 64u * 32 * 4 + 64 + 1000);
  // The reference writer's order: F32 before BF16 in shard 1.
  EXPECT_EQ(ckpt->shard(0).header().tensors[0].name, "b.weight");
  auto c = ckpt->Find("c.weight");
  ASSERT_TRUE(c.has_value());
  std::vector<uint8_t> bytes(1000);
  ASSERT_TRUE(ckpt->shard(c->shard).ReadTensor(*c->entry, bytes).ok());
  EXPECT_EQ(bytes[0], 3);
  EXPECT_EQ(bytes[998], static_cast<uint8_t>(3 + 998));
  EXPECT_EQ(bytes[999], 0xee);
  EXPECT_EQ(Entries(dir_.path()), (std::vector<std::string>{"out", "tokenizer.json"}));
}

TEST_F(CheckpointWriterTest, BytesDoNotDependOnThreadsOrDurability) {
  std::map<std::string, std::string> first;
  int run = 0;
  for (int threads : {1, 3, 8}) {
    for (Durability d : {Durability::kSynced, Durability::kPageCache}) {
      CheckpointWriterOptions o = Options(threads);
      o.destination = dir_ / ("out" + std::to_string(run++));
      o.durability = d;
      FaultInjectingFileSystem counting(FileSystem::Default());
      CheckpointWriter w(&counting, o);
      Declare(w, dir_ / "tokenizer.json");
      ASSERT_TRUE(w.Finish().ok()) << w.status().message();
      EXPECT_EQ(counting.syncs(), d == Durability::kSynced ? 2u : 0u);  // one per shard
      EXPECT_EQ(counting.writeback_hints() > 0, d == Durability::kSynced);
      std::map<std::string, std::string> files;
      for (const std::string& name : Entries(o.destination)) {
        files[name] = *ReadWholeFile(o.destination + "/" + name);
      }
      if (first.empty()) first = files;
      EXPECT_TRUE(files == first) << threads << " threads wrote other bytes";
    }
  }
}

TEST_F(CheckpointWriterTest, DryRunPlanTouchesNothing) {
  CheckpointWriter w(FileSystem::Default(), Options());
  Declare(w, dir_ / "tokenizer.json");
  ASSERT_TRUE(w.Plan().ok());
  EXPECT_EQ(w.tensor_bytes(), 64u * 32 * 4 + 64 + 1000);
  EXPECT_EQ(w.shards(), 2u);
  ExpectNothingLeft();
}

TEST_F(CheckpointWriterTest, AProducerWritingPastItsTensorIsStickyAndLeavesNothing) {
  CheckpointWriter w(FileSystem::Default(), Options());
  Declare(w, dir_ / "tokenizer.json");
  w.AddTensors(1, {{"d.bias", DType::kU8, {4}}}, PatternProducer(5, 5, 0));  // one byte too many
  Status s = w.Finish();
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr(dir_ / ("out/" + std::string(kShard2))));
  EXPECT_THAT(s.message(), HasSubstr("tensor 'd.bias'"));
  EXPECT_EQ(w.Finish().message(), s.message());  // sticky
  ExpectNothingLeft();
}

TEST_F(CheckpointWriterTest, DuplicateTensorIsALayoutErrorNamingIt) {
  CheckpointWriter w(FileSystem::Default(), Options());
  Declare(w, dir_ / "tokenizer.json");
  w.AddTensors(0, {{"a.norm", DType::kU8, {4}}}, PatternProducer(4, 4, 0));
  Status s = w.Finish();
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_THAT(s.message(), HasSubstr("a.norm"));
  EXPECT_THAT(s.message(), HasSubstr(kShard1));
  ExpectNothingLeft();
}

TEST_F(CheckpointWriterTest, AbandonWritesNothingAndFinishThenFails) {
  CheckpointWriter w(FileSystem::Default(), Options());
  Declare(w, dir_ / "tokenizer.json");
  w.Abandon();
  EXPECT_EQ(w.Finish().code(), StatusCode::kCancelled);
  ExpectNothingLeft();
}

// A full disk or a read error at each kind of file the writer makes besides the shards.
TEST_F(CheckpointWriterTest, FaultsAtConfigIndexAndCopyNameThePathAndLeaveNothing) {
  struct Case {
    FileOp op;
    const char* target;
    int err;
    const char* needle;
  };
  const Case cases[] = {
      {FileOp::kWrite, "config.json", ENOSPC, "disk full while writing"},
      {FileOp::kWrite, "model.safetensors.index.json", ENOSPC, "disk full while writing"},
      {FileOp::kWrite, "tokenizer.json", ENOSPC, "disk full while writing"},
      {FileOp::kRead, "tokenizer.json", EIO, "cannot read"},
      {FileOp::kWrite, kShard2, ENOSPC, "disk full while writing"},
      {FileOp::kSync, kShard1, EIO, "cannot sync"},
      {FileOp::kRename, "out", EIO, "cannot rename"},
  };
  for (const Case& c : cases) {
    FaultInjectingFileSystem faulty(FileSystem::Default());
    faulty.FailOperation(c.op, c.target, c.err);
    CheckpointWriter w(&faulty, Options());
    Declare(w, dir_ / "tokenizer.json");
    Status s = w.Finish();
    EXPECT_EQ(s.code(), StatusCode::kIoError) << c.target;
    EXPECT_THAT(s.message(), HasSubstr(c.needle)) << c.target;
    EXPECT_THAT(s.message(), HasSubstr(c.target)) << s.message();
    ExpectNothingLeft();
  }
}

// A disk that fills up inside tensor data: the error names the tensor and the file.
TEST_F(CheckpointWriterTest, DiskFullInTensorDataNamesTheTensor) {
  FaultInjectingFileSystem faulty(FileSystem::Default());
  faulty.SetWriteLimit(1000);  // shard 1's header fits, b.weight's first 1 KiB block does not
  CheckpointWriter w(&faulty, Options(1));
  Declare(w, dir_ / "tokenizer.json");
  Status s = w.Finish();
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'b.weight': disk full while writing"));
  EXPECT_THAT(s.message(), HasSubstr(kShard1));
  ExpectNothingLeft();
}

// A source tensor copied as it is (CopyTensorProducer) has the source's bytes, copied in the
// kernel (mapped reads, the default) or through user memory (SPARKULATOR_READ=pread); a source
// truncated under the copy fails it naming the source file and the tensor, and leaves nothing.
TEST_F(CheckpointWriterTest, CopiedTensorsKeepTheirBytesAndAShortSourceNamesItself) {
  CheckpointWriter source_writer(FileSystem::Default(), Options());
  Declare(source_writer, dir_ / "tokenizer.json");
  ASSERT_TRUE(source_writer.Finish().ok()) << source_writer.status().message();
  const std::string source = dir_ / "out/" + std::string(kShard1);
  std::vector<uint8_t> expected(64 * 32 * 4);
  for (size_t k = 0; k < expected.size(); ++k) expected[k] = static_cast<uint8_t>(1 + k);
  for (const char* read_mode : {"", "pread"}) {
    SCOPED_TRACE(read_mode);
    testing::ScopedReadMode mode(read_mode);
    auto reader = SafetensorsReader::Open(FileSystem::Default(), source);
    ASSERT_TRUE(reader.ok()) << reader.status().message();
    const TensorEntry& entry = *reader->header().Find("b.weight");
    CheckpointWriter w(
        FileSystem::Default(),
        CheckpointWriterOptions::For(dir_ / "copy", false, 2, Durability::kSynced, true));
    w.AddTensors(w.AddShard("model.safetensors"), {{"b.weight", DType::kF32, {64, 32}}},
                 CopyTensorProducer(*reader, entry));
    ASSERT_TRUE(w.Finish().ok()) << w.status().message();
    auto copy = SafetensorsReader::Open(FileSystem::Default(), dir_ / "copy/model.safetensors");
    ASSERT_TRUE(copy.ok());
    std::vector<uint8_t> bytes(expected.size());
    ASSERT_TRUE(copy->ReadTensor(*copy->header().Find("b.weight"), bytes).ok());
    EXPECT_EQ(bytes, expected);
    ASSERT_TRUE(FileSystem::Default()->RemoveAll(dir_ / "copy").ok());
  }
  auto reader = SafetensorsReader::Open(FileSystem::Default(), source);
  ASSERT_TRUE(reader.ok());
  const TensorEntry& entry = *reader->header().Find("b.weight");
  ASSERT_EQ(::truncate(source.c_str(), 1000), 0);
  CheckpointWriter w(
      FileSystem::Default(),
      CheckpointWriterOptions::For(dir_ / "copy", false, 2, Durability::kSynced, true));
  w.AddTensors(w.AddShard("model.safetensors"), {{"b.weight", DType::kF32, {64, 32}}},
               CopyTensorProducer(*reader, entry));
  const Status s = w.Finish();
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'b.weight'"));
  EXPECT_THAT(s.message(), HasSubstr("unexpected end of file in " + source));
  EXPECT_EQ(s.message().find("tensor '"), s.message().rfind("tensor '")) << s.message();  // once
  EXPECT_EQ(Entries(dir_.path()), (std::vector<std::string>{"out", "tokenizer.json"}));
}

// A copy into a sub-folder creates the folder inside the output.
TEST_F(CheckpointWriterTest, CopyIntoASubFolderCreatesIt) {
  CheckpointWriter w(FileSystem::Default(), Options());
  w.AddCopy(dir_ / "tokenizer.json", "1_Pooling/a/config.json");
  w.AddCopy(dir_ / "tokenizer.json", "1_Pooling/b.json");
  ASSERT_TRUE(w.Finish().ok()) << w.status().message();
  EXPECT_EQ(*ReadWholeFile(dir_ / "out/1_Pooling/a/config.json"), "{\"model\": {}}");
  EXPECT_EQ(Entries(dir_ / "out/1_Pooling"), (std::vector<std::string>{"a", "b.json"}));
}

}  // namespace
}  // namespace spk

namespace spk {
namespace {

// A resumable write that fails at the second shard keeps its folder with the first recorded; the
// next resumable run takes that shard over and ends with the bytes of one plain run, without the
// record; a job with other contents starts afresh.
TEST_F(CheckpointWriterTest, AResumableRunTakesOverTheShardsAFailedOneFinished) {
  CheckpointWriter plain(
      FileSystem::Default(),
      CheckpointWriterOptions::For(dir_ / "plain", false, 2, Durability::kPageCache, true));
  Declare(plain, dir_ / "tokenizer.json");
  ASSERT_TRUE(plain.Finish().ok());

  CheckpointWriterOptions o = Options();
  o.resume = true;
  o.resume_identity = "job one";
  FaultInjectingFileSystem faulty(FileSystem::Default());
  faulty.FailOperation(FileOp::kWrite, kShard2, ENOSPC);
  CheckpointWriter failed(&faulty, o);
  Declare(failed, dir_ / "tokenizer.json");
  EXPECT_EQ(failed.Finish().code(), StatusCode::kIoError);
  const std::string unfinished = AtomicOutputDir::ResumableTempPath(dir_ / "out");
  auto record = ParseResumeRecord(*ReadWholeFile(unfinished + "/.resume.json"), "record");
  ASSERT_TRUE(record.ok()) << record.status().message();
  EXPECT_EQ(record->shards.size(), 1u);
  EXPECT_TRUE(record->shards.count(kShard1));

  CheckpointWriter resumed(FileSystem::Default(), o);
  Declare(resumed, dir_ / "tokenizer.json");
  ASSERT_TRUE(resumed.Finish().ok()) << resumed.status().message();
  EXPECT_EQ(resumed.reused_shards(), 1u);
  for (const std::string& name : Entries(dir_ / "plain")) {
    EXPECT_EQ(*ReadWholeFile(dir_ / "out" + "/" + name),
              *ReadWholeFile(dir_ / "plain" + "/" + name))
        << name;
  }
  EXPECT_EQ(Entries(dir_ / "out").size(), Entries(dir_ / "plain").size());
  EXPECT_FALSE(IsDirectory(unfinished));

  // Failed after its first shard, then run again as another job: nothing is taken over.
  o.destination = dir_ / "out2";
  CheckpointWriter again(&faulty, o);
  Declare(again, dir_ / "tokenizer.json");
  test_util::ExpectError(again.Finish(), StatusCode::kIoError,
                         "disk full while writing " +
                             AtomicOutputDir::ResumableTempPath(o.destination) + "/" + kShard2);
  ASSERT_TRUE(IsDirectory(AtomicOutputDir::ResumableTempPath(o.destination)));
  o.resume_identity = "job two";
  CheckpointWriter other(FileSystem::Default(), o);
  Declare(other, dir_ / "tokenizer.json");
  ASSERT_TRUE(other.Finish().ok());
  EXPECT_EQ(other.reused_shards(), 0u);
}

TEST(ResumeRecordTest, ParsesWhatItWritesAndRefusesTheRest) {
  ResumeRecord r;
  r.job = std::string(32, 'a');
  r.shards["model.safetensors"] = {123, std::string(32, '0')};
  auto back = ParseResumeRecord(SerializeResumeRecord(r), "r");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->job, r.job);
  EXPECT_EQ(back->shards.at("model.safetensors").size, 123u);
  for (const char* bad :
       {"", "[]", "{\"version\":2,\"job\":\"\",\"shards\":{}}",
        "{\"version\":1,\"job\":\"xyz\",\"shards\":{}}",
        "{\"version\":1,\"job\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"shards\":{\"../x\":"
        "{\"size\":1,\"xxh3_128\":\"00000000000000000000000000000000\"}}}",
        "{\"version\":1,\"job\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"shards\":{\"a\":"
        "{\"size\":-1,\"xxh3_128\":\"00000000000000000000000000000000\"}}}"}) {
    auto parsed = ParseResumeRecord(bad, "rec.json");
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidInput) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr("rec.json")) << bad;
  }
}

}  // namespace
}  // namespace spk
