// File abstraction for everything sparkulator reads and writes (leveldb's Env): positional reads
// (pread) and writes (pwrite), whole files, folders, copies, renames and removal behind one
// interface, so that tests can swap in a FaultInjectingFileSystem and reach every error path.
// Outside src/io/ no code calls POSIX or std::filesystem for files; it takes a FileSystem*
// (scripts/check-layers.py refuses <filesystem> and <fstream> in src/ outside src/io/, tests
// excepted). Path strings are split with the helpers at the end (Basename, Dirname, JoinPath).
//
// Ownership: FileSystem::Default() is a process-lifetime singleton that callers never delete. Files
// are returned as std::unique_ptr and close their descriptor when destroyed. A FileSystemWrapper
// does not own the file system it forwards to. Thread safety: every FileSystem method may be called
// from several threads; ReadAt and WriteAt may be called concurrently on one file object (writes to
// disjoint ranges); Sync and Close must not race with writes. Errors: every failure is an IoError
// Status whose message names the path and the OS error (NotFound for a missing file or folder
// where noted); a disk that fills up reads "disk full while writing <path>". A short read (the file
// is shorter than expected, e.g. truncated while we read it) is an IoError too, never a silently
// zero-filled buffer.
//
// Reading without copying: RandomAccessFile::View returns the bytes of a range as an
// io/mapped_view.h FileView, a mapping of the file for the POSIX file system (unless the
// environment variable SPARKULATOR_READ is "pread": then, as for every other file, a buffer filled
// by ReadAt), so that the quantizers read weights straight from the page cache.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "io/mapped_view.h"

namespace spk {

class RandomAccessFile {
 public:
  virtual ~RandomAccessFile();
  virtual const std::string& path() const = 0;
  // Size in bytes when the file was opened.
  virtual uint64_t size() const = 0;
  // Reads exactly out.size() bytes starting at `offset`, or fails.
  virtual Status ReadAt(uint64_t offset, std::span<uint8_t> out) const = 0;
  // The bytes [offset, offset + length), or fails as ReadAt does. The default reads them into a
  // buffer the view owns (through ReadAt, so that wrappers such as the fault-injecting file system
  // see every read); the POSIX file maps them. The file must outlive the view.
  virtual Result<FileView> View(uint64_t offset, uint64_t length) const;
};

class WritableFile {
 public:
  virtual ~WritableFile();
  virtual const std::string& path() const = 0;
  // Writes all of `data` at `offset` (the file grows as needed).
  virtual Status WriteAt(uint64_t offset, std::span<const uint8_t> data) = 0;
  // Flushes written data to stable storage (fsync).
  virtual Status Sync() = 0;
  // A hint: start writing [offset, offset + length) to the disk now, without waiting for it
  // (sync_file_range(SYNC_FILE_RANGE_WRITE) on Linux), so that writeback overlaps the work still
  // to come and the final Sync has little left to wait for. Errors are not reported here; Sync
  // reports them. The default does nothing.
  virtual void StartWriteback(uint64_t offset, uint64_t length);
  // Writes `length` bytes of `source`, from `source_offset` on, at `offset`: what ReadAt then
  // WriteAt would write. The default does exactly that, in bounded chunks (so that wrappers such
  // as the fault-injecting file system see every read and write); the POSIX file copies in the
  // kernel (copy_file_range), with no copy through user memory, where both files are its own and
  // the file systems allow it. Errors: ReadAt's (the short read names the source), WriteAt's.
  virtual Status CopyFrom(uint64_t offset, const RandomAccessFile& source, uint64_t source_offset,
                          uint64_t length);
  // Closes the file; later writes fail. Closing twice is OK.
  virtual Status Close() = 0;
};

// Whether a finished output must be on stable storage before it is reported done. kSynced (the
// default everywhere) fsyncs files and folders before the atomic rename, so a power loss never
// leaves a complete-looking checkpoint with missing data; kPageCache leaves writeback to the
// kernel, as cp does: the rename is still atomic against a crash of sparkulator itself.
enum class Durability { kSynced, kPageCache };

// What a path names, following symlinks.
enum class FileKind { kMissing, kFile, kDirectory, kOther };

class FileSystem {
 public:
  virtual ~FileSystem();
  // NotFound for a missing file, InvalidInput for a folder.
  virtual Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) = 0;
  // Creates `path` (mode 0644) or truncates an existing file.
  virtual Result<std::unique_ptr<WritableFile>> CreateForWrite(const std::string& path) = 0;

  // Whole files (config.json, the shard index, tokenizer files). ReadFile: NotFound when missing.
  virtual Result<std::string> ReadFile(const std::string& path) = 0;
  // Creates or truncates `path` and writes `data`; no fsync (AtomicOutputDir::Commit syncs).
  virtual Status WriteFile(const std::string& path, std::string_view data) = 0;
  // Copies the bytes of `from` to `to` (created or truncated); no fsync.
  virtual Status CopyFile(const std::string& from, const std::string& to) = 0;

  virtual FileKind KindOf(const std::string& path) = 0;
  // Names of the entries of `dir` (files and folders), sorted bytewise, without "." and "..";
  // NotFound for a missing folder.
  virtual Result<std::vector<std::string>> ListDirectory(const std::string& dir) = 0;
  // Creates one folder (mode 0755); AlreadyExists when `path` exists.
  virtual Status CreateDirectory(const std::string& path) = 0;
  // rename(2): atomic within one file system; replaces an empty folder or a file at `to`.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // Removes `path` and, for a folder, everything under it; a missing path is OK.
  virtual Status RemoveAll(const std::string& path) = 0;
  // fsync(2) of a file or folder by name (a folder's fsync makes its entries durable).
  virtual Status SyncPath(const std::string& path) = 0;

  // Links. IsLink: whether `path` itself is a symbolic link (lstat; false when missing). ReadLink:
  // the link's text as written (readlink(2)); InvalidInput when `path` is not a link. RealPath:
  // the absolute path with every link, "." and ".." resolved (realpath(3)); NotFound when it or a
  // link on the way leads nowhere
  // (missing, or a loop of links).
  virtual bool IsLink(const std::string& path) = 0;
  virtual Result<std::string> ReadLink(const std::string& path) = 0;
  virtual Result<std::string> RealPath(const std::string& path) = 0;

  bool IsDirectory(const std::string& path) { return KindOf(path) == FileKind::kDirectory; }
  bool FileExists(const std::string& path) { return KindOf(path) == FileKind::kFile; }
  // Anything at `path` (following symlinks), as std::filesystem::exists.
  bool Exists(const std::string& path) { return KindOf(path) != FileKind::kMissing; }
  // Creates `path` and the folders above it that are missing (mkdir -p); OK when it is a folder
  // already, IoError naming the folder that could not be made.
  Status CreateDirectories(const std::string& path);

  // The POSIX file system (pread/pwrite, O_CLOEXEC, copy_file_range).
  static FileSystem* Default();
};

// Forwards every call to another file system; subclass it to change a few operations (tests).
class FileSystemWrapper : public FileSystem {
 public:
  explicit FileSystemWrapper(FileSystem* target) : target_(target) {}
  FileSystem* target() const { return target_; }

  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override {
    return target_->OpenForRead(path);
  }
  Result<std::unique_ptr<WritableFile>> CreateForWrite(const std::string& path) override {
    return target_->CreateForWrite(path);
  }
  Result<std::string> ReadFile(const std::string& path) override { return target_->ReadFile(path); }
  Status WriteFile(const std::string& path, std::string_view data) override {
    return target_->WriteFile(path, data);
  }
  Status CopyFile(const std::string& from, const std::string& to) override {
    return target_->CopyFile(from, to);
  }
  FileKind KindOf(const std::string& path) override { return target_->KindOf(path); }
  Result<std::vector<std::string>> ListDirectory(const std::string& dir) override {
    return target_->ListDirectory(dir);
  }
  Status CreateDirectory(const std::string& path) override {
    return target_->CreateDirectory(path);
  }
  Status Rename(const std::string& from, const std::string& to) override {
    return target_->Rename(from, to);
  }
  Status RemoveAll(const std::string& path) override { return target_->RemoveAll(path); }
  Status SyncPath(const std::string& path) override { return target_->SyncPath(path); }
  bool IsLink(const std::string& path) override { return target_->IsLink(path); }
  Result<std::string> ReadLink(const std::string& path) override { return target_->ReadLink(path); }
  Result<std::string> RealPath(const std::string& path) override { return target_->RealPath(path); }

 private:
  FileSystem* target_;
};

// "<what> <path>: <strerror(err)>", the common shape of an OS error message.
Status IoErrorFromErrno(const std::string& what, const std::string& path, int err);
// The error for a read of [offset, offset+length) that found the file ending at `file_end`.
Status ShortReadError(const std::string& path, uint64_t offset, uint64_t length, uint64_t file_end);

// Path strings, as std::filesystem::path spells them on POSIX. Basename: what follows the last
// '/' ("" for "dir/"), as filename(). Dirname: what precedes the last '/' without the slashes
// that end it ("" when there is none, "/" for a file at the root), as parent_path(). JoinPath:
// `dir` + '/' + `name`, or `name` when `dir` is empty, as operator/.
std::string Basename(const std::string& path);
std::string Dirname(const std::string& path);
std::string JoinPath(const std::string& dir, const std::string& name);

}  // namespace spk
