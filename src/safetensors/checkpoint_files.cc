#include "safetensors/checkpoint_files.h"

#include <set>

namespace spk {
namespace {

constexpr std::string_view kSingleFileName = "model.safetensors";

bool HasSafetensorsSuffix(const std::string& name) {
  constexpr std::string_view kSuffix = ".safetensors";
  return name.size() > kSuffix.size() &&
         name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

Result<std::vector<std::string>> SafetensorsFilesIn(FileSystem* fs, const std::string& dir) {
  SPK_ASSIGN_OR_RETURN(std::vector<std::string> names, fs->ListDirectory(dir));
  std::vector<std::string> files;
  for (std::string& name : names) {
    if (HasSafetensorsSuffix(name) && fs->FileExists(dir + "/" + name))
      files.push_back(std::move(name));
  }
  return files;
}

}  // namespace

Result<SafetensorsCheckpoint> SafetensorsCheckpoint::Open(FileSystem* fs, const std::string& dir) {
  if (!fs->IsDirectory(dir)) return Status::NotFound("no such model folder: " + dir);
  SafetensorsCheckpoint ckpt;
  ckpt.dir_ = dir;
  SPK_ASSIGN_OR_RETURN(std::vector<std::string> present, SafetensorsFilesIn(fs, dir));

  const std::string index_path = dir + "/" + std::string(kShardIndexFileName);
  if (fs->FileExists(index_path)) {
    SPK_ASSIGN_OR_RETURN(std::string text, fs->ReadFile(index_path));
    SPK_ASSIGN_OR_RETURN(ShardIndex index, ParseShardIndex(index_path, text));
    std::set<std::string> listed;
    for (const auto& [tensor, file] : index.weight_map) listed.insert(file);
    ckpt.shard_files_.assign(listed.begin(), listed.end());
    for (const std::string& file : present) {
      if (!listed.count(file)) {
        ckpt.warnings_.push_back(dir + "/" + file + " is not named in " +
                                 std::string(kShardIndexFileName) +
                                 "; vLLM will not load its tensors");
      }
    }
    ckpt.index_ = std::move(index);
  } else if (fs->FileExists(dir + "/" + std::string(kSingleFileName))) {
    ckpt.shard_files_ = {std::string(kSingleFileName)};
  } else if (present.size() == 1) {
    ckpt.shard_files_ = present;
  } else if (present.empty()) {
    return Status::NotFound(dir + " holds no .safetensors file (expected model.safetensors or " +
                            std::string(kShardIndexFileName) + ")");
  } else {
    return Status::InvalidInput(dir + " holds " + std::to_string(present.size()) +
                                " .safetensors files but no " + std::string(kShardIndexFileName) +
                                " saying which to load; add the index or keep one file");
  }
  SPK_RETURN_IF_ERROR(ckpt.OpenShards(fs));
  ckpt.BuildLookup();
  if (ckpt.index_) SPK_RETURN_IF_ERROR(ckpt.CheckAgainstIndex());
  return ckpt;
}

Status SafetensorsCheckpoint::OpenShards(FileSystem* fs) {
  for (const std::string& file : shard_files_) {
    const std::string path = dir_ + "/" + file;
    if (!fs->FileExists(path)) {
      return Status::NotFound(path + " is named in " + std::string(kShardIndexFileName) +
                              " but does not exist; the checkpoint is incomplete");
    }
    SPK_ASSIGN_OR_RETURN(SafetensorsReader reader, SafetensorsReader::Open(fs, path));
    shards_.push_back(std::move(reader));
  }
  return Status::Ok();
}

Status SafetensorsCheckpoint::CheckAgainstIndex() const {
  const std::string index_path = dir_ + "/" + std::string(kShardIndexFileName);
  for (size_t i = 0; i < shards_.size(); ++i) {
    for (const TensorEntry& t : shards_[i].header().tensors) {
      auto it = index_->weight_map.find(t.name);
      if (it == index_->weight_map.end()) {
        return Status::InvalidInput(shards_[i].path() + ": tensor '" + t.name +
                                    "' is not listed in " + index_path + "; fix the index");
      }
      if (it->second != shard_files_[i]) {
        return Status::InvalidInput(shards_[i].path() + ": tensor '" + t.name +
                                    "' is also here, but " + index_path + " places it in " +
                                    it->second);
      }
    }
  }
  // Every shard tensor is now known to be listed for its own shard, so a listed tensor that the
  // lookup lacks is missing from the shard the index names.
  for (const auto& [tensor, file] : index_->weight_map) {
    if (!lookup_.count(tensor)) {
      return Status::InvalidInput(index_path + " places tensor '" + tensor + "' in " + file +
                                  ", but " + dir_ + "/" + file + " does not contain it");
    }
  }
  return Status::Ok();
}

void SafetensorsCheckpoint::BuildLookup() {
  for (size_t i = 0; i < shards_.size(); ++i) {
    for (const TensorEntry& t : shards_[i].header().tensors)
      lookup_.emplace(t.name, Located{i, &t});
  }
}

std::optional<SafetensorsCheckpoint::Located> SafetensorsCheckpoint::Find(
    std::string_view tensor) const {
  auto it = lookup_.find(std::string(tensor));
  if (it == lookup_.end()) return std::nullopt;
  return it->second;
}

}  // namespace spk
