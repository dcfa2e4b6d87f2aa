#include "io/atomic_dir.h"

#include <unistd.h>

#include <filesystem>
#include <random>

namespace spk {
namespace {

// DST without trailing slashes, so that its parent and name are what the user meant.
std::string StripTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

std::string RandomSuffix() {
  std::random_device device;
  std::uniform_int_distribution<uint32_t> dist;
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "%08x", dist(device));
  return buffer;
}

// The folder that holds `dst` ("." for a bare name). Path arithmetic only; no file system call.
std::string ParentOf(const std::string& dst) {
  std::string parent = std::filesystem::path(dst).parent_path().string();
  return parent.empty() ? "." : parent;
}

// A sibling of `dst` named ".<dstname>.<kind>-<pid>-<random>".
std::string SiblingPath(const std::string& dst, const std::string& kind) {
  std::string name = "." + std::filesystem::path(dst).filename().string() + "." + kind + "-" +
                     std::to_string(::getpid()) + "-" + RandomSuffix();
  return (std::filesystem::path(ParentOf(dst)) / name).string();
}

}  // namespace

Status WriteFileAtomically(FileSystem* fs, const std::string& path, std::string_view data) {
  const std::string temp = SiblingPath(path, "tmp");
  Status s = fs->WriteFile(temp, data);
  if (s.ok()) s = fs->Rename(temp, path);
  if (s.ok()) return s;
  (void)fs->RemoveAll(temp);  // best effort: a leftover hidden sibling is harmless
  return Status::IoError("cannot write " + path + " (" + s.message() + "); it is unchanged");
}

namespace {

// The checks both Create functions make of DST: a name, an existing parent, and no non-empty DST
// unless `force`. Returns DST without trailing slashes.
Result<std::string> CheckDestination(FileSystem* fs, const std::string& dst_in, bool force) {
  const std::string dst = StripTrailingSlashes(dst_in);
  if (dst.empty()) return Status::Usage("the output folder name is empty");
  const std::string parent = ParentOf(dst);
  if (!fs->IsDirectory(parent)) {
    return Status::NotFound("the parent folder of " + dst + " (" + parent +
                            ") does not exist; create it first");
  }
  switch (fs->KindOf(dst)) {
    case FileKind::kMissing:
      break;
    case FileKind::kDirectory: {
      SPK_ASSIGN_OR_RETURN(std::vector<std::string> entries, fs->ListDirectory(dst));
      if (!entries.empty() && !force) {
        return Status::AlreadyExists(
            dst + " already exists and is not empty; pass --force to replace it");
      }
      break;
    }
    default:
      return Status::AlreadyExists(dst + " exists and is not a folder; choose another output path");
  }
  return dst;
}

}  // namespace

Result<AtomicOutputDir> AtomicOutputDir::Create(FileSystem* fs, const std::string& dst_in,
                                                bool force) {
  SPK_ASSIGN_OR_RETURN(const std::string dst, CheckDestination(fs, dst_in, force));
  for (int attempt = 0; attempt < 16; ++attempt) {
    std::string temp = SiblingPath(dst, "tmp");
    Status made = fs->CreateDirectory(temp);
    if (made.ok()) return AtomicOutputDir(fs, dst, temp, force);
    if (made.code() != StatusCode::kAlreadyExists) return made;
  }
  return Status::IoError("cannot create a temporary folder beside " + dst);
}

std::string AtomicOutputDir::ResumableTempPath(const std::string& dst) {
  const std::string stripped = StripTrailingSlashes(dst);
  const std::string name =
      "." + std::filesystem::path(stripped).filename().string() + ".tmp-unfinished";
  return (std::filesystem::path(ParentOf(stripped)) / name).string();
}

Result<AtomicOutputDir> AtomicOutputDir::CreateResumable(FileSystem* fs, const std::string& dst_in,
                                                         bool force) {
  SPK_ASSIGN_OR_RETURN(const std::string dst, CheckDestination(fs, dst_in, force));
  const std::string temp = ResumableTempPath(dst);
  bool resumed = false;
  switch (fs->KindOf(temp)) {
    case FileKind::kMissing:
      SPK_RETURN_IF_ERROR(fs->CreateDirectory(temp));
      break;
    case FileKind::kDirectory:
      resumed = true;
      break;
    default:
      return Status::AlreadyExists(temp + " exists and is not a folder: remove it to resume");
  }
  AtomicOutputDir out(fs, dst, temp, force);
  out.keep_on_failure_ = true;
  out.resumed_ = resumed;
  return out;
}

AtomicOutputDir::AtomicOutputDir(AtomicOutputDir&& other) noexcept
    : fs_(other.fs_),
      dst_(std::move(other.dst_)),
      temp_path_(std::move(other.temp_path_)),
      force_(other.force_),
      keep_on_failure_(other.keep_on_failure_),
      resumed_(other.resumed_) {
  other.temp_path_.clear();
}

AtomicOutputDir& AtomicOutputDir::operator=(AtomicOutputDir&& other) noexcept {
  if (this != &other) {
    RemoveTemp();
    fs_ = other.fs_;
    dst_ = std::move(other.dst_);
    temp_path_ = std::move(other.temp_path_);
    force_ = other.force_;
    keep_on_failure_ = other.keep_on_failure_;
    resumed_ = other.resumed_;
    other.temp_path_.clear();
  }
  return *this;
}

AtomicOutputDir::~AtomicOutputDir() { RemoveTemp(); }

void AtomicOutputDir::RemoveTemp() {
  if (temp_path_.empty()) return;
  if (keep_on_failure_) {  // the next resumable run continues from it
    temp_path_.clear();
    return;
  }
  (void)fs_->RemoveAll(temp_path_);  // best effort: a leftover ".tmp" folder is harmless
  temp_path_.clear();
}

// Fsyncs every regular file and folder under `root` (depth first), then `root` itself.
Status AtomicOutputDir::SyncTree(const std::string& root) {
  SPK_ASSIGN_OR_RETURN(std::vector<std::string> names, fs_->ListDirectory(root));
  for (const std::string& name : names) {
    const std::string path = root + "/" + name;
    switch (fs_->KindOf(path)) {
      case FileKind::kFile:
        SPK_RETURN_IF_ERROR(fs_->SyncPath(path));
        break;
      case FileKind::kDirectory:
        SPK_RETURN_IF_ERROR(SyncTree(path));
        break;
      default:
        break;
    }
  }
  return fs_->SyncPath(root);
}

Status AtomicOutputDir::Commit(Durability durability) {
  if (temp_path_.empty())
    return Status::Internal("AtomicOutputDir::Commit called twice for " + dst_);
  const bool synced = durability == Durability::kSynced;
  if (synced) SPK_RETURN_IF_ERROR(SyncTree(temp_path_));

  std::string old_aside;
  if (FileKind kind = fs_->KindOf(dst_); kind != FileKind::kMissing) {
    bool empty = false;
    if (kind == FileKind::kDirectory) {
      auto entries = fs_->ListDirectory(dst_);
      empty = entries.ok() && entries->empty();
    }
    if (!empty && !force_) {
      return Status::AlreadyExists(dst_ + " appeared while writing; pass --force to replace it");
    }
    // Move the old folder aside first: a crash between the two renames leaves the old checkpoint
    // under its aside name, never a half-deleted one under DST.
    old_aside = SiblingPath(dst_, "old");
    SPK_RETURN_IF_ERROR(fs_->Rename(dst_, old_aside));
  }
  Status renamed = fs_->Rename(temp_path_, dst_);
  if (!renamed.ok()) {
    if (!old_aside.empty()) (void)fs_->Rename(old_aside, dst_);  // put the old checkpoint back
    return renamed;
  }
  temp_path_.clear();
  if (!old_aside.empty()) {
    Status removed = fs_->RemoveAll(old_aside);
    if (!removed.ok())
      return Status::IoError("cannot remove the replaced folder: " + removed.message());
  }
  return synced ? fs_->SyncPath(ParentOf(dst_)) : Status::Ok();
}

}  // namespace spk
