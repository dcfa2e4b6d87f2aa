// CheckpointWriter: writes one safetensors checkpoint folder (shards, the shard index, config.json
// and the files copied unchanged) the way every writer in sparkulator must: headers and offsets
// planned up front, tensor data produced in row blocks by a worker pool with a bound on the bytes
// in flight and written at its final offset, durability as asked, and an atomic rename at the end,
// so that a failed or interrupted run leaves nothing behind. A builder in leveldb's style:
//
//   CheckpointWriter w(fs, options);
//   size_t shard = w.AddShard("model.safetensors");
//   w.AddTensors(shard, {{name, dtype, shape}}, producer);  // once per tensor group
//   w.AddFile("config.json", text);
//   w.AddCopy(src_dir + "/tokenizer.json", "tokenizer.json");
//   SPK_RETURN_IF_ERROR(w.Finish());  // or w.Abandon()
//
// Within a shard, tensors are laid out in the order the reference writer picks (safetensors/
// writer.h SortLikeReference), so the bytes are those Python's save_file writes (or, with
// declared_order, in the order they were added); they do not depend on the thread count or on the
// order the producers run in. Groups run one after another, shard by shard, in the order they were
// added; only the blocks of one group run concurrently. A producer declares a group of tensors
// filled together (a quantized weight's packed values, scales, shape and zero points) and fills
// them through a TensorSink in `blocks` independent work items, then an optional `finish` step that
// runs once every block is done (data that spans blocks, such as zero points packed across rows).
//
// Ownership: the writer owns the temporary folder while Finish runs; the FileSystem, the Progress
// and whatever the producers capture must outlive Finish. Thread safety: the writer itself is for
// one thread; the blocks of one producer run concurrently on the worker pool (base/parallel.h), so
// a producer's block function must be safe to call from several threads at once.
// Errors: sticky, leveldb style: the first error wins, later Add calls are ignored and Finish
// returns it. Layout errors are InvalidInput naming the tensor; a failed write names the tensor and
// the file; a producer's own errors (reads, codecs) are returned as the producer worded them. Every
// failure, Abandon() and destruction without a successful Finish() remove the temporary folder and
// leave DST as it was; a resumable write (options.resume) keeps its folder for the next run.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "io/file.h"
#include "safetensors/reader.h"
#include "safetensors/resume_record.h"
#include "safetensors/writer.h"

namespace spk {

// Source bytes per work item a producer should aim for: large enough to amortize a pread, small
// enough that workers x block stays far below the memory budget.
inline constexpr uint64_t kWriterBlockBytes = 4u << 20;

struct CheckpointWriterOptions {
  std::string destination;  // must not exist, or be empty, unless force
  bool force = false;
  int threads = 0;  // 0: all cores; capped so that the bytes in flight stay bounded (see .cc)
  // kPageCache (--no-fsync) skips every fsync and writeback hint; the rename stays atomic.
  Durability durability = Durability::kSynced;
  bool write_index = false;  // write model.safetensors.index.json (the source was sharded)
  // Lay each shard's tensors out in the order they were added instead of the reference writer's
  // order (`example` keeps the layout its files have always had).
  bool declared_order = false;
  // Started as progress->Start(progress_label, progress_total) before the first shard and
  // finished after the last; producers advance it through TensorSink::Advance.
  Progress* progress = nullptr;
  std::string progress_label;
  uint64_t progress_total = 0;
  const std::atomic<bool>* cancel = nullptr;  // polled between blocks: Status::Cancelled
  // A resumable write (quantize --resume): the temporary folder is AtomicOutputDir's resumable
  // one, kept when the run fails or is killed; each shard written whole is recorded in it
  // (safetensors/resume_record.h), and a later run of the same job reuses the recorded shards
  // whose size and content hash still match and writes the rest. `resume_identity` is the
  // caller's part of the job: what decides the bytes besides the planned layout and the files
  // (its source files and their sizes, the method, ...).
  bool resume = false;
  std::string resume_identity;
  // One part of a job split across machines (quantize --part I/N): only the shards numbered in
  // `shards` (AddShard's numbers) are written, with every other file, and a part record
  // (resume_record.h PartRecord) for `sparkulator merge`. `resume_identity` is the job's identity
  // here too.
  struct Part {
    int index = 0;  // 1-based
    int count = 0;
    std::vector<size_t> shards;
  };
  std::optional<Part> part;

  // The options every command that writes a checkpoint takes from its flags.
  static CheckpointWriterOptions For(std::string destination, bool force, int threads,
                                     Durability durability, bool write_index) {
    CheckpointWriterOptions o;
    o.destination = std::move(destination);
    o.force = force;
    o.threads = threads;
    o.durability = durability;
    o.write_index = write_index;
    return o;
  }
};

// Where a producer writes its tensors. Offsets are relative to the first byte of each tensor.
class TensorSink {
 public:
  // Writes `bytes` at `offset` of the producer's tensor number `tensor` (its index in the list
  // given to AddTensors). A range outside that tensor is an Internal error (a producer bug), never
  // a write into a neighbour. Thread-safe for disjoint ranges.
  Status Write(size_t tensor, uint64_t offset, std::span<const uint8_t> bytes) const;
  // Writes `length` bytes of source tensor `entry` of `reader`, from its byte `source_offset` on,
  // as Write would write them, but without bringing them into this process where the file system
  // can copy in the kernel (SafetensorsReader::CopyTensorBytes).
  Status Copy(size_t tensor, uint64_t offset, const SafetensorsReader& reader,
              const TensorEntry& entry, uint64_t source_offset, uint64_t length) const;
  // Adds `units` (source bytes consumed) to the progress line.
  void Advance(uint64_t units) const;

 private:
  friend class CheckpointWriter;
  // The file offset of [offset, offset + length) of tensor number `tensor`, or an Internal error
  // when the range lies outside it (a producer bug).
  Result<uint64_t> FileOffset(size_t tensor, uint64_t offset, uint64_t length) const;
  // Starts the writeback of a range just written, when the run asked for it.
  void StartWritebackIfAsked(uint64_t file_offset, uint64_t length) const;
  struct Target {
    const TensorSpec* spec;
    uint64_t offset;  // in the file
    uint64_t nbytes;
  };
  WritableFile* file_ = nullptr;
  std::string dst_file_;  // DST/<shard>, for messages
  std::vector<Target> targets_;
  bool start_writeback_ = false;
  Progress* progress_ = nullptr;
};

struct TensorProducer {
  size_t blocks = 1;
  std::function<Status(size_t block, const TensorSink& out)> write_block;
  std::function<Status(const TensorSink& out)> finish;  // optional
};

// A producer that copies `entry` of `reader` unchanged, in 64 MiB blocks (TensorSink::Copy: in the
// kernel where it can), advancing the progress by the bytes copied. `reader` must outlive Finish.
TensorProducer CopyTensorProducer(const SafetensorsReader& reader, const TensorEntry& entry);

class CheckpointWriter {
 public:
  CheckpointWriter(FileSystem* fs, CheckpointWriterOptions options);
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;
  ~CheckpointWriter();  // Abandon()s unless Finish() succeeded

  // Declares an output shard file (written even when it gets no tensor); returns its number.
  size_t AddShard(std::string file_name);
  // Declares `tensors`, filled by `producer`, in shard `shard`. REQUIRES: Plan() not called yet.
  void AddTensors(size_t shard, std::vector<TensorSpec> tensors, TensorProducer producer);
  // A whole file written after the shards (config.json), in declaration order with the copies.
  void AddFile(std::string name, std::string contents);
  // A file copied unchanged from `source_path` (tokenizer.json, README.md). `name` may name a
  // sub-folder ("1_Pooling/config.json"); its folders are created as needed.
  void AddCopy(std::string source_path, std::string name);
  // Lays out every shard (headers, offsets); Finish calls it when the caller has not. Touches no
  // file, so a dry run may call it to learn the output's size.
  Status Plan();
  // Bytes of tensor data over every shard (file sizes minus headers). REQUIRES: Plan() ok.
  uint64_t tensor_bytes() const;
  size_t shards() const { return shards_.size(); }
  // Shards a resumable Finish took over from an interrupted run instead of writing them.
  size_t reused_shards() const { return reused_shards_; }

  // Writes everything into a temporary folder beside DST and renames it to DST.
  Status Finish();
  // Gives up: nothing is (or stays) written; a later Finish fails.
  void Abandon();
  const Status& status() const { return status_; }

 private:
  struct Group {
    size_t first_tensor;  // into Shard::tensors (declaration order)
    size_t count;
    TensorProducer producer;
  };
  struct Shard {
    std::string file;
    std::vector<TensorSpec> tensors;  // declaration order
    std::vector<Group> groups;
    std::optional<SafetensorsLayout> layout;
  };
  struct ExtraFile {
    std::string name;
    std::string contents;     // for AddFile
    std::string source_path;  // for AddCopy; empty for AddFile
  };

  Status SetError(Status status);
  Status WriteAll();
  Status WriteShard(const Shard& shard, const std::string& dir, int workers);
  Status WriteIndex(const std::string& dir);
  // Resumable writes: the job's hash, the record of `dir` for it (a folder of another job, or one
  // without a readable record, is emptied first), whether a recorded shard can be taken over, and
  // recording a shard once it is written.
  std::string JobHash() const;
  Result<ResumeRecord> StartResume(const std::string& dir);
  bool Reusable(const ResumeRecord& record, const Shard& shard, const std::string& dir);
  Status RecordShard(ResumeRecord* record, const Shard& shard, const std::string& dir);
  bool InPart(size_t shard) const;
  Status WritePartRecord(const std::string& dir);

  FileSystem* fs_;
  CheckpointWriterOptions options_;
  std::vector<Shard> shards_;
  size_t reused_shards_ = 0;
  std::vector<ExtraFile> files_;
  bool planned_ = false;
  bool closed_ = false;  // finished or abandoned
  Status status_ = Status::Ok();
};

}  // namespace spk
