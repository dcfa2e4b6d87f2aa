#include "checkpoint/other_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "safetensors/index.h"

namespace spk {
namespace {

namespace stdfs = std::filesystem;

// What the writers produce, or what model_free_ptq skips too: never copied from the top level.
bool LeftOut(const std::string& name) {
  return name == "config.json" || name == kShardIndexFileName || name.ends_with(".safetensors") ||
         name == ".cache" || name == ".gitattributes";
}

bool Within(const stdfs::path& path, const stdfs::path& folder) {
  return std::mismatch(folder.begin(), folder.end(), path.begin(), path.end()).first ==
         folder.end();
}

// The folder links may lead into: the source, or the model's folder of the Hugging Face cache when
// the source is one of its snapshots (their files link to ../../blobs/).
stdfs::path LinkBoundary(const stdfs::path& source) {
  const stdfs::path repo = source.parent_path().parent_path();
  std::error_code ec;
  if (source.parent_path().filename() == "snapshots" && stdfs::is_directory(repo / "blobs", ec)) {
    return repo;
  }
  return source;
}

class Walk {
 public:
  Walk(FileSystem* fs, CheckpointWriter* out, std::vector<std::string>* warnings)
      : fs_(fs), out_(out), warnings_(warnings) {}

  Status Source(const std::string& src_dir) {
    std::error_code ec;
    stdfs::path real = stdfs::canonical(src_dir, ec);
    if (ec) {  // the file system's own error, or ours when it lists a folder that cannot resolve
      Status listed = fs_->ListDirectory(src_dir).status();
      return listed.ok() ? Status::NotFound("no such folder: " + src_dir) : listed;
    }
    boundary_ = LinkBoundary(real);
    return Folder(src_dir, real, "");
  }

  std::vector<std::string> copied;

 private:
  // `path` as the caller named it, `real` its canonical path, `prefix` its name in the output.
  Status Folder(const std::string& path, const stdfs::path& real, const std::string& prefix) {
    if (!on_path_.insert(real).second) {
      return Status::InvalidInput(
          fmt::format("{}: a link back into {}, a folder it is in (a loop); remove the link", path,
                      real.string()));
    }
    SPK_ASSIGN_OR_RETURN(std::vector<std::string> names, fs_->ListDirectory(path));
    for (const std::string& name : names) {
      if (prefix.empty() && LeftOut(name)) continue;
      SPK_RETURN_IF_ERROR(Entry(path + "/" + name, real / name, prefix + name));
    }
    on_path_.erase(real);
    return Status::Ok();
  }

  Status Entry(const std::string& path, stdfs::path real, const std::string& name) {
    std::error_code ec;
    if (stdfs::is_symlink(stdfs::symlink_status(path, ec))) {
      SPK_ASSIGN_OR_RETURN(real, LinkTarget(path));
    }
    switch (fs_->KindOf(path)) {
      case FileKind::kDirectory:
        return Folder(path, real, name + "/");
      case FileKind::kFile:
        out_->AddCopy(path, name);
        copied.push_back(name);
        return Status::Ok();
      case FileKind::kMissing:
        return Status::NotFound(fmt::format("{}: removed while the folder was read", path));
      case FileKind::kOther:
        break;
    }
    warnings_->push_back(fmt::format("{}: neither a file nor a folder, not copied", path));
    return Status::Ok();
  }

  Result<stdfs::path> LinkTarget(const std::string& link) {
    std::error_code ec;
    stdfs::path target = stdfs::canonical(link, ec);
    if (ec) {
      return Status::InvalidInput(fmt::format(
          "{}: a link to {}, which does not exist; remove the link or restore its target", link,
          stdfs::read_symlink(link, ec).string()));
    }
    if (!Within(target, boundary_)) {
      return Status::InvalidInput(fmt::format(
          "{}: a link to {}, outside the source folder {}; sparkulator does not copy files from "
          "outside the checkpoint: copy the file into the folder or remove the link",
          link, target.string(), boundary_.string()));
    }
    return target;
  }

  FileSystem* fs_;
  CheckpointWriter* out_;
  std::vector<std::string>* warnings_;
  stdfs::path boundary_;
  std::set<stdfs::path> on_path_;  // the folders being walked, to catch a link loop
};

}  // namespace

Result<std::vector<std::string>> CopyOtherFiles(FileSystem* fs, const std::string& src_dir,
                                                CheckpointWriter* out,
                                                std::vector<std::string>* warnings) {
  Walk walk(fs, out, warnings);
  SPK_RETURN_IF_ERROR(walk.Source(src_dir));
  return std::move(walk.copied);
}

}  // namespace spk
