#include "source/other_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "safetensors/index.h"
#include "safetensors/resume_record.h"
#include "source/source.h"

namespace spk {
namespace {

// What the writers produce (a split job's part record too: `merge` copies a part's other files),
// what model_free_ptq skips too, or a description of the source's quantization (ModelOpt's,
// AutoGPTQ's, AutoAWQ's), which the output's config.json replaces: never copied from the top level.
bool LeftOut(const std::string& name) {
  return name == "config.json" || name == kShardIndexFileName || name.ends_with(".safetensors") ||
         name == ".cache" || name == ".gitattributes" || name == kPartRecordFile ||
         std::find(kQuantizationSideFiles.begin(), kQuantizationSideFiles.end(), name) !=
             kQuantizationSideFiles.end();
}

// Whether the resolved `path` is `folder` or under it (both as RealPath gives them).
bool Within(const std::string& path, const std::string& folder) {
  if (folder == "/") return true;
  return path == folder || (path.starts_with(folder) && path[folder.size()] == '/');
}

// The folder links may lead into: the source, or the model's folder of the Hugging Face cache when
// the source is one of its snapshots (their files link to ../../blobs/).
std::string LinkBoundary(FileSystem* fs, const std::string& source) {
  const std::string repo = Dirname(Dirname(source));
  if (Basename(Dirname(source)) == "snapshots" && fs->IsDirectory(JoinPath(repo, "blobs"))) {
    return repo;
  }
  return source;
}

class Walk {
 public:
  Walk(FileSystem* fs, CheckpointWriter* out, std::vector<std::string>* warnings)
      : fs_(fs), out_(out), warnings_(warnings) {}

  Status Source(const std::string& src_dir) {
    Result<std::string> real = fs_->RealPath(src_dir);
    if (!real.ok()) {  // the listing's own error, or the resolving one when it lists
      Status listed = fs_->ListDirectory(src_dir).status();
      if (!listed.ok()) return listed;
      return real.status().code() == StatusCode::kNotFound
                 ? Status::NotFound("no such folder: " + src_dir)
                 : real.status();
    }
    boundary_ = LinkBoundary(fs_, *real);
    return Folder(src_dir, *real, "");
  }

  std::vector<std::string> copied;

 private:
  // `path` as the caller named it, `real` its canonical path, `prefix` its name in the output.
  Status Folder(const std::string& path, const std::string& real, const std::string& prefix) {
    if (!on_path_.insert(real).second) {
      return Status::InvalidInput(fmt::format(
          "{}: a link back into {}, a folder it is in (a loop); remove the link", path, real));
    }
    SPK_ASSIGN_OR_RETURN(std::vector<std::string> names, fs_->ListDirectory(path));
    for (const std::string& name : names) {
      if (prefix.empty() && LeftOut(name)) continue;
      SPK_RETURN_IF_ERROR(Entry(path + "/" + name, JoinPath(real, name), prefix + name));
    }
    on_path_.erase(real);
    return Status::Ok();
  }

  Status Entry(const std::string& path, std::string real, const std::string& name) {
    if (fs_->IsLink(path)) {
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

  Result<std::string> LinkTarget(const std::string& link) {
    Result<std::string> target = fs_->RealPath(link);
    if (!target.ok()) {
      if (target.status().code() != StatusCode::kNotFound) return target.status();
      Result<std::string> text = fs_->ReadLink(link);
      return Status::InvalidInput(fmt::format(
          "{}: a link to {}, which does not exist; remove the link or restore its target", link,
          text.ok() ? *text : ""));
    }
    if (!Within(*target, boundary_)) {
      return Status::InvalidInput(fmt::format(
          "{}: a link to {}, outside the source folder {}; sparkulator does not copy files from "
          "outside the checkpoint: copy the file into the folder or remove the link",
          link, *target, boundary_));
    }
    return *target;
  }

  FileSystem* fs_;
  CheckpointWriter* out_;
  std::vector<std::string>* warnings_;
  std::string boundary_;
  std::set<std::string> on_path_;  // the folders being walked, to catch a link loop
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
