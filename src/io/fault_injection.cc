#include "io/fault_injection.h"

#include <cerrno>

namespace spk {

struct FaultInjectingFileSystem::Faults {
  mutable std::mutex mu;
  std::optional<uint64_t> write_limit;
  uint64_t bytes_written = 0;
  uint64_t syncs = 0;            // Sync calls that reached the base file
  uint64_t writeback_hints = 0;  // StartWriteback calls passed on
  std::map<std::string, uint64_t> fail_reads_from;
  std::map<std::string, uint64_t> apparent_size;

  std::optional<uint64_t> Lookup(const std::map<std::string, uint64_t>& m,
                                 const std::string& path) const {
    std::lock_guard<std::mutex> lock(mu);
    auto it = m.find(path);
    if (it == m.end()) return std::nullopt;
    return it->second;
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
    : base_(base), faults_(std::make_shared<Faults>()) {}

FaultInjectingFileSystem::~FaultInjectingFileSystem() = default;

Result<std::unique_ptr<RandomAccessFile>> FaultInjectingFileSystem::OpenForRead(
    const std::string& path) {
  SPK_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, base_->OpenForRead(path));
  return std::unique_ptr<RandomAccessFile>(new FaultyReadFile(std::move(file), faults_));
}

Result<std::unique_ptr<WritableFile>> FaultInjectingFileSystem::CreateForWrite(
    const std::string& path) {
  SPK_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, base_->CreateForWrite(path));
  return std::unique_ptr<WritableFile>(new FaultyWritableFile(std::move(file), faults_));
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

void FaultInjectingFileSystem::ClearFaults() {
  std::lock_guard<std::mutex> lock(faults_->mu);
  faults_->write_limit.reset();
  faults_->fail_reads_from.clear();
  faults_->apparent_size.clear();
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
