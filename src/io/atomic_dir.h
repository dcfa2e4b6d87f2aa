// AtomicOutputDir: write a checkpoint folder so that an interrupted run never leaves something that
// looks like a checkpoint. Files are written into a temporary folder beside DST
// (".<dstname>.tmp-<pid>-<random>"), and Commit() fsyncs them and renames the folder to DST.
//
//   SPK_ASSIGN_OR_RETURN(AtomicOutputDir out, AtomicOutputDir::Create(fs, dst, force));
//   ... write files under out.temp_path() ...
//   SPK_RETURN_IF_ERROR(out.Commit());
//
// Every file system call goes through the FileSystem given to Create, which must outlive the
// object. Ownership: the object owns the temporary folder; destroying it without a successful
// Commit() removes the folder and everything in it (so an error path cleans up by returning).
// Movable, not copyable. Thread safety: none; use from one thread (files inside may be written from
// many). Errors: AlreadyExists for a non-empty DST without force, NotFound for a missing parent
// folder, IoError for file system failures.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "io/file.h"

namespace spk {

// Writes `data` to the file `path` so that `path` holds, at every moment, either what it held
// before or all of `data`: into a sibling ".<name>.tmp-<pid>-<random>", renamed over `path` when
// complete (no fsync, as FileSystem::WriteFile). On failure the sibling is removed, `path` is as it
// was, and the IoError names `path` and says so. For the single files a command writes where a user
// may keep something (a model card over README.md, bench results).
Status WriteFileAtomically(FileSystem* fs, const std::string& path, std::string_view data);

class AtomicOutputDir {
 public:
  // Refuses a DST that exists and is not an empty folder unless `force` (then Commit replaces it),
  // and a DST whose parent folder does not exist. Creates the temporary folder.
  static Result<AtomicOutputDir> Create(FileSystem* fs, const std::string& dst, bool force);

  // The same, for a run that can be resumed (quantize --resume): the temporary folder has the
  // fixed name ResumableTempPath(dst) and is reused when an interrupted run left it (resumed()
  // says so); it is kept, not removed, when this object goes without a Commit, so that the next
  // resumable run finds what this one finished. What in it may be reused is the caller's to
  // verify (safetensors/resume_record.h).
  static Result<AtomicOutputDir> CreateResumable(FileSystem* fs, const std::string& dst,
                                                 bool force);
  // ".<dstname>.tmp-unfinished" beside `dst`.
  static std::string ResumableTempPath(const std::string& dst);
  bool resumed() const { return resumed_; }

  AtomicOutputDir(AtomicOutputDir&& other) noexcept;
  AtomicOutputDir& operator=(AtomicOutputDir&& other) noexcept;
  AtomicOutputDir(const AtomicOutputDir&) = delete;
  AtomicOutputDir& operator=(const AtomicOutputDir&) = delete;
  ~AtomicOutputDir();

  // The folder to write into until Commit().
  const std::string& temp_path() const { return temp_path_; }
  const std::string& dst() const { return dst_; }

  // With kSynced, fsyncs every file under the temporary folder and the folder itself; then replaces
  // an existing DST (when created with force), renames the temporary folder to DST and, with
  // kSynced, fsyncs the parent. REQUIRES: not committed yet.
  Status Commit(Durability durability = Durability::kSynced);

 private:
  AtomicOutputDir(FileSystem* fs, std::string dst, std::string temp_path, bool force)
      : fs_(fs), dst_(std::move(dst)), temp_path_(std::move(temp_path)), force_(force) {}
  void RemoveTemp();
  Status SyncTree(const std::string& root);

  FileSystem* fs_ = nullptr;
  std::string dst_;
  std::string temp_path_;  // empty once committed or moved from
  bool force_ = false;
  bool keep_on_failure_ = false;  // a resumable run's folder outlives a failed run
  bool resumed_ = false;
};

}  // namespace spk
