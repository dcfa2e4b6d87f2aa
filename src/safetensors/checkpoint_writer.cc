#include "safetensors/checkpoint_writer.h"

#include <algorithm>
#include <utility>

#include "base/parallel.h"
#include "io/atomic_dir.h"
#include "io/content_hash.h"
#include "safetensors/index.h"

namespace spk {
namespace {

// Cap on the bytes all workers hold at once (a block of source data plus what a producer makes of
// it, about 1.5 blocks each), so that peak memory stays far below the 384 MiB budget on machines
// with many cores, whatever --threads says and whatever the checkpoint's size.
constexpr uint64_t kMaxBytesInFlight = 192u << 20;
constexpr int kMaxWorkers = static_cast<int>(kMaxBytesInFlight / (kWriterBlockBytes * 3 / 2));

// Creates the folders of `name` ("a/b/c.json": a and a/b) under `root`, those that exist already
// too.
Status CreateParentFolders(FileSystem* fs, const std::string& root, const std::string& name) {
  for (size_t slash = name.find('/'); slash != std::string::npos;
       slash = name.find('/', slash + 1)) {
    Status made = fs->CreateDirectory(root + "/" + name.substr(0, slash));
    if (!made.ok() && made.code() != StatusCode::kAlreadyExists) return made;
  }
  return Status::Ok();
}

Status WithTensor(const Status& s, const std::string& tensor) {
  return Status(s.code(), "tensor '" + tensor + "': " + s.message());
}

}  // namespace

Result<uint64_t> TensorSink::FileOffset(size_t tensor, uint64_t offset, uint64_t length) const {
  if (tensor >= targets_.size()) {
    return Status::Internal(dst_file_ + ": a producer wrote to tensor #" + std::to_string(tensor) +
                            " of " + std::to_string(targets_.size()));
  }
  const Target& t = targets_[tensor];
  if (offset > t.nbytes || length > t.nbytes - offset) {
    return Status::Internal(dst_file_ + ": tensor '" + t.spec->name + "': a write of " +
                            std::to_string(length) + " bytes at " + std::to_string(offset) +
                            " runs past its " + std::to_string(t.nbytes) + " bytes");
  }
  return t.offset + offset;
}

void TensorSink::StartWritebackIfAsked(uint64_t file_offset, uint64_t length) const {
  // Start the block's writeback at once: the disk then works while later blocks are computed,
  // instead of all at the final fsync.
  if (start_writeback_) file_->StartWriteback(file_offset, length);
}

Status TensorSink::Write(size_t tensor, uint64_t offset, std::span<const uint8_t> bytes) const {
  SPK_ASSIGN_OR_RETURN(const uint64_t at, FileOffset(tensor, offset, bytes.size()));
  const Status written = file_->WriteAt(at, bytes);
  if (!written.ok()) return WithTensor(written, targets_[tensor].spec->name);
  StartWritebackIfAsked(at, bytes.size());
  return Status::Ok();
}

Status TensorSink::Copy(size_t tensor, uint64_t offset, const SafetensorsReader& reader,
                        const TensorEntry& entry, uint64_t source_offset, uint64_t length) const {
  SPK_ASSIGN_OR_RETURN(const uint64_t at, FileOffset(tensor, offset, length));
  // The reader's error names the tensor already (a copy keeps its name).
  SPK_RETURN_IF_ERROR(reader.CopyTensorBytes(entry, source_offset, length, *file_, at));
  StartWritebackIfAsked(at, length);
  return Status::Ok();
}

void TensorSink::Advance(uint64_t units) const {
  if (progress_ != nullptr) progress_->Advance(units);
}

// A copied tensor's blocks are larger than the writer's: a kernel copy holds no bytes in this
// process (and the copy by hand 1 MiB at a time), and copy_file_range pays per call (300 MiB of
// page cache in 4 MiB calls took twice as long as in 1 GiB calls here).
constexpr uint64_t kCopyBlockBytes = uint64_t{64} << 20;

TensorProducer CopyTensorProducer(const SafetensorsReader& reader, const TensorEntry& entry) {
  const uint64_t total = entry.nbytes();
  TensorProducer p;
  p.blocks = static_cast<size_t>((total + kCopyBlockBytes - 1) / kCopyBlockBytes);
  p.write_block = [&reader, &entry, total](size_t b, const TensorSink& out) -> Status {
    const uint64_t begin = b * kCopyBlockBytes;
    const uint64_t length = std::min(kCopyBlockBytes, total - begin);
    SPK_RETURN_IF_ERROR(out.Copy(0, begin, reader, entry, begin, length));
    out.Advance(length);
    return Status::Ok();
  };
  return p;
}

CheckpointWriter::CheckpointWriter(FileSystem* fs, CheckpointWriterOptions options)
    : fs_(fs), options_(std::move(options)) {}

CheckpointWriter::~CheckpointWriter() = default;  // Finish never leaves a temporary folder

Status CheckpointWriter::SetError(Status status) {
  if (status_.ok()) status_ = status;
  return status_;
}

size_t CheckpointWriter::AddShard(std::string file_name) {
  shards_.push_back({std::move(file_name), {}, {}, std::nullopt});
  return shards_.size() - 1;
}

void CheckpointWriter::AddTensors(size_t shard, std::vector<TensorSpec> tensors,
                                  TensorProducer producer) {
  if (!status_.ok()) return;
  if (planned_ || closed_ || shard >= shards_.size() || !producer.write_block) {
    // AddTensors reports through the writer's status, which Plan and Finish return.
    static_cast<void>(
        SetError(Status::Internal("CheckpointWriter::AddTensors: " +
                                  (tensors.empty() ? std::string("no tensor") : tensors[0].name) +
                                  ": after Plan/Finish, an unknown shard or no producer")));
    return;
  }
  Shard& s = shards_[shard];
  s.groups.push_back({s.tensors.size(), tensors.size(), std::move(producer)});
  for (TensorSpec& t : tensors) s.tensors.push_back(std::move(t));
}

void CheckpointWriter::AddFile(std::string name, std::string contents) {
  files_.push_back({std::move(name), std::move(contents), {}});
}

void CheckpointWriter::AddCopy(std::string source_path, std::string name) {
  files_.push_back({std::move(name), {}, std::move(source_path)});
}

Status CheckpointWriter::Plan() {
  if (!status_.ok() || planned_) return status_;
  for (Shard& shard : shards_) {
    std::vector<TensorSpec> specs = shard.tensors;
    if (!options_.declared_order) SortLikeReference(specs);
    auto layout = SafetensorsLayout::Plan(std::move(specs));
    if (!layout.ok()) {
      return SetError(Status(layout.status().code(), options_.destination + "/" + shard.file +
                                                         ": " + layout.status().message()));
    }
    shard.layout = std::move(*layout);
  }
  planned_ = true;
  return Status::Ok();
}

uint64_t CheckpointWriter::tensor_bytes() const {
  uint64_t total = 0;
  for (const Shard& shard : shards_) {
    total += shard.layout->file_size() - shard.layout->data_start();
  }
  return total;
}

Status CheckpointWriter::Finish() {
  if (closed_ && status_.ok()) {
    return SetError(Status::Internal("CheckpointWriter::Finish after Finish or Abandon for " +
                                     options_.destination));
  }
  SPK_RETURN_IF_ERROR(Plan());
  closed_ = true;
  return SetError(WriteAll());
}

void CheckpointWriter::Abandon() {
  if (!closed_) {
    static_cast<void>(
        SetError(Status::Cancelled("the output " + options_.destination + " was abandoned")));
  }
  closed_ = true;
}

// Everything lands in the temporary folder of `out`, which removes it on every early return.
Status CheckpointWriter::WriteAll() {
  SPK_ASSIGN_OR_RETURN(
      AtomicOutputDir out,
      options_.resume ? AtomicOutputDir::CreateResumable(fs_, options_.destination, options_.force)
                      : AtomicOutputDir::Create(fs_, options_.destination, options_.force));
  ResumeRecord record;
  if (options_.resume) {
    SPK_ASSIGN_OR_RETURN(record, StartResume(out.temp_path()));
  }
  const int workers = std::min(ResolveThreadCount(options_.threads), kMaxWorkers);
  if (options_.progress) options_.progress->Start(options_.progress_label, options_.progress_total);
  for (size_t i = 0; i < shards_.size(); ++i) {
    const Shard& shard = shards_[i];
    if (!InPart(i)) continue;
    if (options_.resume && Reusable(record, shard, out.temp_path())) {
      ++reused_shards_;
      continue;
    }
    SPK_RETURN_IF_ERROR(WriteShard(shard, out.temp_path(), workers));
    if (options_.resume) SPK_RETURN_IF_ERROR(RecordShard(&record, shard, out.temp_path()));
  }
  if (options_.progress) options_.progress->Finish();
  if (options_.write_index) SPK_RETURN_IF_ERROR(WriteIndex(out.temp_path()));
  for (const ExtraFile& f : files_) {
    SPK_RETURN_IF_ERROR(CreateParentFolders(fs_, out.temp_path(), f.name));
    const std::string path = out.temp_path() + "/" + f.name;
    SPK_RETURN_IF_ERROR(f.source_path.empty() ? fs_->WriteFile(path, f.contents)
                                              : fs_->CopyFile(f.source_path, path));
  }
  if (options_.part) SPK_RETURN_IF_ERROR(WritePartRecord(out.temp_path()));
  if (options_.resume) {  // the record is the unfinished folder's, not the checkpoint's
    for (std::string_view name : {kResumeRecordFile, kResumeRecordNextFile}) {
      SPK_RETURN_IF_ERROR(fs_->RemoveAll(out.temp_path() + "/" + std::string(name)));
    }
  }
  return out.Commit(options_.durability);
}

std::string CheckpointWriter::JobHash() const {
  std::string job = "identity\n" + options_.resume_identity + "\n";
  for (const Shard& shard : shards_) {
    job += "shard\n" + shard.file + "\n" + shard.layout->header_bytes() + "\n" +
           std::to_string(shard.layout->file_size()) + "\n";
  }
  for (const ExtraFile& f : files_) {
    job += "file\n" + f.name + "\n" +
           (f.source_path.empty() ? ContentHash(f.contents) : "copy of " + f.source_path) + "\n";
  }
  return ContentHash(job);
}

bool CheckpointWriter::InPart(size_t shard) const {
  if (!options_.part) return true;
  const std::vector<size_t>& mine = options_.part->shards;
  return std::find(mine.begin(), mine.end(), shard) != mine.end();
}

Status CheckpointWriter::WritePartRecord(const std::string& dir) {
  PartRecord record;
  record.job = JobHash();
  record.part = options_.part->index;
  record.parts = options_.part->count;
  for (size_t i = 0; i < shards_.size(); ++i) {
    record.all_shards.push_back(shards_[i].file);
    if (!InPart(i)) continue;
    SPK_ASSIGN_OR_RETURN(std::string hash, HashFile(fs_, dir + "/" + shards_[i].file));
    record.shards[shards_[i].file] = {shards_[i].layout->file_size(), std::move(hash)};
  }
  return fs_->WriteFile(dir + "/" + std::string(kPartRecordFile), SerializePartRecord(record));
}

Result<ResumeRecord> CheckpointWriter::StartResume(const std::string& dir) {
  const std::string path = dir + "/" + std::string(kResumeRecordFile);
  ResumeRecord record;
  record.job = JobHash();
  if (fs_->KindOf(path) == FileKind::kFile) {
    SPK_ASSIGN_OR_RETURN(std::string text, fs_->ReadFile(path));
    Result<ResumeRecord> found = ParseResumeRecord(text, path);
    if (found.ok() && found->job == record.job) return std::move(*found);
  }
  // Another job's folder (other options or source), or one killed before its first record: its
  // files are not this job's to reuse.
  SPK_ASSIGN_OR_RETURN(std::vector<std::string> names, fs_->ListDirectory(dir));
  for (const std::string& name : names) SPK_RETURN_IF_ERROR(fs_->RemoveAll(dir + "/" + name));
  return record;
}

bool CheckpointWriter::Reusable(const ResumeRecord& record, const Shard& shard,
                                const std::string& dir) {
  auto it = record.shards.find(shard.file);
  if (it == record.shards.end() || it->second.size != shard.layout->file_size()) return false;
  const std::string path = dir + "/" + shard.file;
  if (fs_->KindOf(path) != FileKind::kFile) return false;
  Result<std::string> hash = HashFile(fs_, path);
  return hash.ok() && *hash == it->second.hash;
}

Status CheckpointWriter::RecordShard(ResumeRecord* record, const Shard& shard,
                                     const std::string& dir) {
  SPK_ASSIGN_OR_RETURN(std::string hash, HashFile(fs_, dir + "/" + shard.file));
  record->shards[shard.file] = {shard.layout->file_size(), std::move(hash)};
  const std::string next = dir + "/" + std::string(kResumeRecordNextFile);
  SPK_RETURN_IF_ERROR(fs_->WriteFile(next, SerializeResumeRecord(*record)));
  return fs_->Rename(next, dir + "/" + std::string(kResumeRecordFile));
}

Status CheckpointWriter::WriteShard(const Shard& shard, const std::string& dir, int workers) {
  const std::string path = dir + "/" + shard.file;
  SPK_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, fs_->CreateForWrite(path));
  SPK_RETURN_IF_ERROR(WriteSafetensorsHeader(*file, *shard.layout));
  const bool synced = options_.durability == Durability::kSynced;
  for (const Group& group : shard.groups) {
    TensorSink sink;
    sink.file_ = file.get();
    sink.dst_file_ = options_.destination + "/" + shard.file;
    sink.start_writeback_ = synced;
    sink.progress_ = options_.progress;
    for (size_t i = group.first_tensor; i < group.first_tensor + group.count; ++i) {
      const TensorSpec& spec = shard.tensors[i];
      SPK_ASSIGN_OR_RETURN(uint64_t offset, shard.layout->AbsoluteOffset(spec.name));
      sink.targets_.push_back({&spec, offset, shard.layout->TensorBytes(spec.name)});
    }
    const TensorProducer& p = group.producer;
    SPK_RETURN_IF_ERROR(ParallelFor(
        workers, p.blocks, [&](size_t b) { return p.write_block(b, sink); }, options_.cancel));
    if (p.finish) SPK_RETURN_IF_ERROR(p.finish(sink));
  }
  if (synced) SPK_RETURN_IF_ERROR(file->Sync());
  return file->Close();
}

Status CheckpointWriter::WriteIndex(const std::string& dir) {
  ShardIndex index;
  for (const Shard& shard : shards_) {
    for (const TensorSpec& spec : shard.layout->tensors()) {
      index.weight_map[spec.name] = shard.file;
      index.total_size += shard.layout->TensorBytes(spec.name);
    }
  }
  return fs_->WriteFile(dir + "/" + std::string(kShardIndexFileName), SerializeShardIndex(index));
}

}  // namespace spk
