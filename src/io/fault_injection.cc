#include "io/fault_injection.h"

#include <cerrno>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace spk {

struct FaultInjectingFileSystem::Faults {
  mutable std::mutex mu;
  std::optional<uint64_t> write_limit;
  uint64_t bytes_written = 0;
  uint64_t syncs = 0;            // Sync calls that reached the base file
  uint64_t writeback_hints = 0;  // StartWriteback calls passed on
  std::map<std::string, uint64_t> fail_reads_from;
  std::map<std::string, uint64_t> apparent_size;
  std::map<std::pair<FileOp, std::string>, int> failing_ops;  // (op, path or name) -> errno

  std::optional<uint64_t> Lookup(const std::map<std::string, uint64_t>& m,
                                 const std::string& path) const {
    std::lock_guard<std::mutex> lock(mu);
    auto it = m.find(path);
    if (it == m.end()) return std::nullopt;
    return it->second;
  }

  // The injected failure of `op` on `path`, if any: by full path first, then by last component.
  Status Check(FileOp op, const std::string& path) const {
    static constexpr const char* kWhat[] = {
        "cannot read",   "cannot write",  "cannot list", "cannot create folder",
        "cannot rename", "cannot remove", "cannot sync", "cannot resolve"};
    const std::string name = path.substr(path.find_last_of('/') + 1);
    std::lock_guard<std::mutex> lock(mu);
    for (const std::string& key : {path, name}) {
      auto it = failing_ops.find({op, key});
      if (it != failing_ops.end()) {
        return IoErrorFromErrno(kWhat[static_cast<int>(op)], path, it->second);
      }
    }
    return Status::Ok();
  }
};

namespace {

using Faults = FaultInjectingFileSystem::Faults;

class FaultyReadFile final : public RandomAccessFile {
 public:
  FaultyReadFile(std::unique_ptr<RandomAccessFile> base, std::shared_ptr<Faults> faults)
      : base_(std::move(base)), faults_(std::move(faults)) {}

  const std::string& path() const override { return base_->path(); }

  uint64_t size() const override {
    std::optional<uint64_t> truncated = faults_->Lookup(faults_->apparent_size, path());
    return truncated ? std::min(*truncated, base_->size()) : base_->size();
  }

  Status ReadAt(uint64_t offset, std::span<uint8_t> out) const override {
    SPK_RETURN_IF_ERROR(faults_->Check(FileOp::kRead, path()));
    uint64_t end = offset + out.size();
    std::optional<uint64_t> fail_from = faults_->Lookup(faults_->fail_reads_from, path());
    if (fail_from && end > *fail_from && !out.empty()) {
      return IoErrorFromErrno("cannot read", path(), EIO);
    }
    uint64_t apparent = size();
    if (end > apparent) {
      return ShortReadError(path(), offset, out.size(), apparent);
    }
    return base_->ReadAt(offset, out);
  }

 private:
  std::unique_ptr<RandomAccessFile> base_;
  std::shared_ptr<Faults> faults_;
};

class FaultyWritableFile final : public WritableFile {
 public:
  FaultyWritableFile(std::unique_ptr<WritableFile> base, std::shared_ptr<Faults> faults)
      : base_(std::move(base)), faults_(std::move(faults)) {}

  const std::string& path() const override { return base_->path(); }

  Status WriteAt(uint64_t offset, std::span<const uint8_t> data) override {
    SPK_RETURN_IF_ERROR(faults_->Check(FileOp::kWrite, path()));
    {
      std::lock_guard<std::mutex> lock(faults_->mu);
      if (faults_->write_limit && faults_->bytes_written + data.size() > *faults_->write_limit) {
        return IoErrorFromErrno("cannot write", path(), ENOSPC);
      }
      // Reserve the bytes before writing so concurrent writers cannot overshoot the limit together.
      faults_->bytes_written += data.size();
    }
    Status status = base_->WriteAt(offset, data);
    if (!status.ok()) {
      std::lock_guard<std::mutex> lock(faults_->mu);
      faults_->bytes_written -= data.size();
    }
    return status;
  }

  Status Sync() override {
    SPK_RETURN_IF_ERROR(faults_->Check(FileOp::kSync, path()));
    {
      std::lock_guard<std::mutex> lock(faults_->mu);
      ++faults_->syncs;
    }
    return base_->Sync();
  }
  void StartWriteback(uint64_t offset, uint64_t length) override {
    {
      std::lock_guard<std::mutex> lock(faults_->mu);
      ++faults_->writeback_hints;
    }
    base_->StartWriteback(offset, length);
  }
  Status Close() override { return base_->Close(); }

 private:
  std::unique_ptr<WritableFile> base_;
  std::shared_ptr<Faults> faults_;
};

}  // namespace

FaultInjectingFileSystem::FaultInjectingFileSystem(FileSystem* base)
    : FileSystemWrapper(base), faults_(std::make_shared<Faults>()) {}

FaultInjectingFileSystem::~FaultInjectingFileSystem() = default;

Result<std::unique_ptr<RandomAccessFile>> FaultInjectingFileSystem::OpenForRead(
    const std::string& path) {
  SPK_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, target()->OpenForRead(path));
  return std::unique_ptr<RandomAccessFile>(new FaultyReadFile(std::move(file), faults_));
}

Result<std::unique_ptr<WritableFile>> FaultInjectingFileSystem::CreateForWrite(
    const std::string& path) {
  SPK_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, target()->CreateForWrite(path));
  return std::unique_ptr<WritableFile>(new FaultyWritableFile(std::move(file), faults_));
}

Result<std::string> FaultInjectingFileSystem::ReadFile(const std::string& path) {
  SPK_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, OpenForRead(path));
  if (file->size() == 0 && !faults_->Lookup(faults_->apparent_size, path)) {
    // A /proc file says 0 in stat and still has bytes: the base reads to the end. A read fault
    // still applies (FailReadsFrom cannot touch a byte of an empty file), and an empty file reads
    // empty either way.
    SPK_RETURN_IF_ERROR(faults_->Check(FileOp::kRead, path));
    return target()->ReadFile(path);
  }
  std::string contents(file->size(), '\0');
  SPK_RETURN_IF_ERROR(
      file->ReadAt(0, {reinterpret_cast<uint8_t*>(contents.data()), contents.size()}));
  return contents;
}

Status FaultInjectingFileSystem::WriteFile(const std::string& path, std::string_view data) {
  SPK_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, CreateForWrite(path));
  SPK_RETURN_IF_ERROR(
      file->WriteAt(0, {reinterpret_cast<const uint8_t*>(data.data()), data.size()}));
  return file->Close();
}

Status FaultInjectingFileSystem::CopyFile(const std::string& from, const std::string& to) {
  SPK_ASSIGN_OR_RETURN(std::string contents, ReadFile(from));
  return WriteFile(to, contents);
}

Result<std::vector<std::string>> FaultInjectingFileSystem::ListDirectory(const std::string& dir) {
  SPK_RETURN_IF_ERROR(faults_->Check(FileOp::kList, dir));
  return target()->ListDirectory(dir);
}

Status FaultInjectingFileSystem::CreateDirectory(const std::string& path) {
  SPK_RETURN_IF_ERROR(faults_->Check(FileOp::kCreateDirectory, path));
  return target()->CreateDirectory(path);
}

Status FaultInjectingFileSystem::Rename(const std::string& from, const std::string& to) {
  SPK_RETURN_IF_ERROR(faults_->Check(FileOp::kRename, from));
  SPK_RETURN_IF_ERROR(faults_->Check(FileOp::kRename, to));
  return target()->Rename(from, to);
}

Status FaultInjectingFileSystem::RemoveAll(const std::string& path) {
  SPK_RETURN_IF_ERROR(faults_->Check(FileOp::kRemove, path));
  return target()->RemoveAll(path);
}

Status FaultInjectingFileSystem::SyncPath(const std::string& path) {
  SPK_RETURN_IF_ERROR(faults_->Check(FileOp::kSync, path));
  return target()->SyncPath(path);
}

Result<std::string> FaultInjectingFileSystem::ReadLink(const std::string& path) {
  SPK_RETURN_IF_ERROR(faults_->Check(FileOp::kResolve, path));
  return target()->ReadLink(path);
}

Result<std::string> FaultInjectingFileSystem::RealPath(const std::string& path) {
  SPK_RETURN_IF_ERROR(faults_->Check(FileOp::kResolve, path));
  return target()->RealPath(path);
}

void FaultInjectingFileSystem::SetWriteLimit(uint64_t max_total_bytes) {
  std::lock_guard<std::mutex> lock(faults_->mu);
  faults_->write_limit = max_total_bytes;
}

void FaultInjectingFileSystem::FailReadsFrom(const std::string& path, uint64_t offset) {
  std::lock_guard<std::mutex> lock(faults_->mu);
  faults_->fail_reads_from[path] = offset;
}

void FaultInjectingFileSystem::TruncateFile(const std::string& path, uint64_t apparent_size) {
  std::lock_guard<std::mutex> lock(faults_->mu);
  faults_->apparent_size[path] = apparent_size;
}

void FaultInjectingFileSystem::FailOperation(FileOp op, const std::string& target, int err) {
  std::lock_guard<std::mutex> lock(faults_->mu);
  faults_->failing_ops[{op, target}] = err;
}

void FaultInjectingFileSystem::ClearFaults() {
  std::lock_guard<std::mutex> lock(faults_->mu);
  faults_->write_limit.reset();
  faults_->fail_reads_from.clear();
  faults_->apparent_size.clear();
  faults_->failing_ops.clear();
}

uint64_t FaultInjectingFileSystem::bytes_written() const {
  std::lock_guard<std::mutex> lock(faults_->mu);
  return faults_->bytes_written;
}

uint64_t FaultInjectingFileSystem::syncs() const {
  std::lock_guard<std::mutex> lock(faults_->mu);
  return faults_->syncs;
}

uint64_t FaultInjectingFileSystem::writeback_hints() const {
  std::lock_guard<std::mutex> lock(faults_->mu);
  return faults_->writeback_hints;
}

}  // namespace spk
