#include "io/atomic_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <random>

#include "io/file.h"

namespace spk {
namespace fs = std::filesystem;
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

// A sibling of `dst` named ".<dstname>.<kind>-<pid>-<random>".
std::string SiblingPath(const fs::path& dst, const std::string& kind) {
  std::string name = "." + dst.filename().string() + "." + kind + "-" + std::to_string(::getpid()) +
                     "-" + RandomSuffix();
  return (dst.parent_path() / name).string();
}

Status FsyncPath(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return IoErrorFromErrno("cannot open for sync", path, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return IoErrorFromErrno("cannot sync", path, err);
  return Status::Ok();
}

// Fsyncs every regular file and folder under `root` (depth first), then `root` itself.
Status FsyncTree(const std::string& root) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    const fs::directory_entry& entry = *it;
    if (entry.is_regular_file(ec)) {
      SPK_RETURN_IF_ERROR(FsyncPath(entry.path().string(), /*directory=*/false));
    } else if (entry.is_directory(ec)) {
      SPK_RETURN_IF_ERROR(FsyncPath(entry.path().string(), /*directory=*/true));
    }
  }
  if (ec) return Status::IoError("cannot walk " + root + ": " + ec.message());
  return FsyncPath(root, /*directory=*/true);
}

Status RenamePath(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return IoErrorFromErrno("cannot rename " + from + " to", to, errno);
  }
  return Status::Ok();
}

}  // namespace

Result<AtomicOutputDir> AtomicOutputDir::Create(const std::string& dst_in, bool force) {
  const std::string dst = StripTrailingSlashes(dst_in);
  if (dst.empty()) return Status::Usage("the output folder name is empty");
  fs::path dst_path(dst);
  fs::path parent = dst_path.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) {
    return Status::NotFound("the parent folder of " + dst + " (" + parent.string() +
                            ") does not exist; create it first");
  }
  fs::file_status st = fs::status(dst_path, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) {
      return Status::AlreadyExists(dst + " exists and is not a folder; choose another output path");
    }
    bool empty = fs::is_empty(dst_path, ec);
    if (ec) return Status::IoError("cannot list " + dst + ": " + ec.message());
    if (!empty && !force) {
      return Status::AlreadyExists(dst +
                                   " already exists and is not empty; pass --force to replace it");
    }
  }
  fs::path anchored = parent / dst_path.filename();
  for (int attempt = 0; attempt < 16; ++attempt) {
    std::string temp = SiblingPath(anchored, "tmp");
    if (::mkdir(temp.c_str(), 0755) == 0) return AtomicOutputDir(dst, temp, force);
    if (errno != EEXIST) return IoErrorFromErrno("cannot create temporary folder", temp, errno);
  }
  return Status::IoError("cannot create a temporary folder beside " + dst);
}

AtomicOutputDir::AtomicOutputDir(AtomicOutputDir&& other) noexcept
    : dst_(std::move(other.dst_)), temp_path_(std::move(other.temp_path_)), force_(other.force_) {
  other.temp_path_.clear();
}

AtomicOutputDir& AtomicOutputDir::operator=(AtomicOutputDir&& other) noexcept {
  if (this != &other) {
    RemoveTemp();
    dst_ = std::move(other.dst_);
    temp_path_ = std::move(other.temp_path_);
    force_ = other.force_;
    other.temp_path_.clear();
  }
  return *this;
}

AtomicOutputDir::~AtomicOutputDir() { RemoveTemp(); }

void AtomicOutputDir::RemoveTemp() {
  if (temp_path_.empty()) return;
  std::error_code ec;
  fs::remove_all(temp_path_, ec);  // best effort: a leftover ".tmp" folder is harmless
  temp_path_.clear();
}

Status AtomicOutputDir::Commit(Durability durability) {
  if (temp_path_.empty())
    return Status::Internal("AtomicOutputDir::Commit called twice for " + dst_);
  const bool synced = durability == Durability::kSynced;
  if (synced) SPK_RETURN_IF_ERROR(FsyncTree(temp_path_));

  fs::path dst_path(dst_);
  fs::path parent = dst_path.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  fs::file_status st = fs::status(dst_path, ec);
  std::string old_aside;
  if (fs::exists(st)) {
    bool empty = fs::is_directory(st) && fs::is_empty(dst_path, ec);
    if (!empty && !force_) {
      return Status::AlreadyExists(dst_ + " appeared while writing; pass --force to replace it");
    }
    // Move the old folder aside first: a crash between the two renames leaves the old checkpoint
    // under its aside name, never a half-deleted one under DST.
    old_aside = SiblingPath(parent / dst_path.filename(), "old");
    SPK_RETURN_IF_ERROR(RenamePath(dst_, old_aside));
  }
  Status renamed = RenamePath(temp_path_, dst_);
  if (!renamed.ok()) {
    if (!old_aside.empty()) (void)RenamePath(old_aside, dst_);  // put the old checkpoint back
    return renamed;
  }
  temp_path_.clear();
  if (!old_aside.empty()) {
    fs::remove_all(old_aside, ec);
    if (ec)
      return Status::IoError("cannot remove the replaced folder " + old_aside + ": " +
                             ec.message());
  }
  return synced ? FsyncPath(parent.string(), /*directory=*/true) : Status::Ok();
}

}  // namespace spk
