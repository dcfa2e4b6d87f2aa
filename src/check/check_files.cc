// Checker parts: which shards vLLM loads, the shard index, the safetensors rules of every file.
#include "check/checker.h"

#include <algorithm>

namespace spk::check_internal {

// A folder or index that cannot be read is an error of the run, not a finding: nothing can be said
// about a checkpoint whose files the disk does not give back.
Status Checker::LoadFiles() {
  SPK_ASSIGN_OR_RETURN(std::vector<std::string> listing, fs_->ListDirectory(dir_));
  std::vector<std::string> present;
  for (const std::string& name : listing) {
    if (HasSuffix(name, ".safetensors") && fs_->FileExists(dir_ + "/" + name)) {
      present.push_back(name);
    }
  }
  std::sort(present.begin(), present.end());
  std::string index_path = dir_ + "/" + std::string(kShardIndexFileName);
  if (fs_->FileExists(index_path)) {
    SPK_ASSIGN_OR_RETURN(std::string text, fs_->ReadFile(index_path));
    auto parsed = ParseShardIndex(index_path, text);
    if (!parsed.ok()) {
      Add(FindingCode::kIndexInvalid, "", std::string(kShardIndexFileName),
          parsed.status().message(),
          "rewrite the index: {\"metadata\": {\"total_size\": N}, \"weight_map\": {tensor: file}}");
    } else {
      index_ = std::move(parsed).value();
    }
  }
  if (!index_) {
    if (present.empty()) {
      Add(FindingCode::kNoSafetensors, "", "",
          "the folder holds no .safetensors file; vLLM has nothing to load",
          "save the weights as safetensors (model.safetensors or shards with an index)");
      return Status::Ok();
    }
    if (present.size() > 1) {
      Add(FindingCode::kIndexMissing, "", "",
          fmt::format("{} .safetensors files but no {}: vLLM loads them all, transformers "
                      "loads none",
                      present.size(), kShardIndexFileName),
          "write model.safetensors.index.json");
    }
    for (const std::string& f : present) SPK_RETURN_IF_ERROR(OpenShard(f, true));
    return Status::Ok();
  }
  std::map<std::string, size_t> listed;  // file -> tensors the index places there
  for (const auto& [tensor, file] : index_->weight_map) listed[file]++;
  for (const auto& [file, count] : listed) {
    if (std::find(present.begin(), present.end(), file) == present.end()) {
      Add(FindingCode::kIndexFileMissing, "", file,
          fmt::format("the index places {} tensor(s) in {}, which does not exist; vLLM fails to "
                      "load the checkpoint",
                      count, file),
          "copy the missing shard into the folder, or rewrite the index");
    } else {
      SPK_RETURN_IF_ERROR(OpenShard(file, true));
    }
  }
  for (const std::string& file : present) {
    if (!listed.count(file)) SPK_RETURN_IF_ERROR(OpenShard(file, false));
  }
  CheckIndexAgainstShards();
  return Status::Ok();
}

// A shard the disk fails to give back ends the run (IoError, exit 3) like the index does; only a
// file that was read and does not conform is a finding about the checkpoint.
Status Checker::OpenShard(const std::string& file, bool listed) {
  auto reader = SafetensorsReader::Open(fs_, dir_ + "/" + file);
  if (!reader.ok()) {
    if (reader.status().code() == StatusCode::kIoError) return reader.status();
    Add(FindingCode::kSafetensorsInvalid, "", file, reader.status().message(),
        "rewrite the file with a conforming safetensors writer (docs/formats.md section 1)");
    return Status::Ok();
  }
  const auto& metadata = reader->header().metadata;
  auto format = std::find_if(metadata.begin(), metadata.end(),
                             [](const auto& kv) { return kv.first == "format"; });
  // No __metadata__ at all is accepted by every loader; one without format "pt" is not
  // (transformers 4.x raises "does not contain the valid metadata").
  if (!metadata.empty() && (format == metadata.end() || format->second != "pt")) {
    Add(FindingCode::kSafetensorsMetadataFormat, "", file,
        "__metadata__ lacks \"format\": \"pt\"; transformers 4.x refuses to load the file",
        "write __metadata__ {\"format\": \"pt\"}");
  }
  if (!listed) {
    unlisted_.emplace_back(file, std::move(reader).value());
    return Status::Ok();
  }
  size_t shard = readers_.size();
  readers_.push_back(std::move(reader).value());
  reader_files_.push_back(file);
  report_.shards.push_back(file);
  for (const TensorEntry& t : readers_.back().header().tensors) {
    auto [it, inserted] = tensors_.emplace(t.name, Located{shard, &t});
    if (!inserted) {
      Add(FindingCode::kDuplicateTensor, t.name, file,
          fmt::format("tensor is also in {}; which copy vLLM keeps depends on load order",
                      reader_files_[it->second.shard]),
          "keep one copy and fix the index");
    }
  }
  return Status::Ok();
}

void Checker::CheckIndexAgainstShards() {
  for (const auto& [file, reader] : unlisted_) {
    size_t hidden = 0;
    for (const TensorEntry& t : reader.header().tensors) hidden += !tensors_.count(t.name);
    Add(FindingCode::kShardNotInIndex, hidden > 0 ? Severity::kError : Severity::kWarning, "", file,
        fmt::format("{} is not named in {}: vLLM silently skips it{}", file, kShardIndexFileName,
                    hidden > 0 ? fmt::format(", and {} tensor(s) exist only there", hidden) : ""),
        hidden > 0 ? "add its tensors to the index's weight_map" : "delete the stray file");
  }
  for (const auto& [tensor, file] : index_->weight_map) {
    auto it = tensors_.find(tensor);
    bool file_open =
        std::find(reader_files_.begin(), reader_files_.end(), file) != reader_files_.end();
    if (it == tensors_.end() && file_open) {
      Add(FindingCode::kIndexTensorMissing, tensor, file,
          fmt::format("the index places the tensor in {}, which does not contain it", file),
          "rewrite the index from the shards' headers");
    } else if (it != tensors_.end() && reader_files_[it->second.shard] != file) {
      Add(FindingCode::kIndexWrongShard, tensor, reader_files_[it->second.shard],
          fmt::format("the index places the tensor in {}", file),
          "rewrite the index from the shards' headers");
    }
  }
  for (const auto& [tensor, located] : tensors_) {
    if (!index_->weight_map.count(tensor)) {
      Add(FindingCode::kTensorNotInIndex, tensor, reader_files_[located.shard],
          "not listed in the index's weight_map (vLLM loads it with its shard; other loaders "
          "may not)",
          "add it to the weight_map");
    }
  }
}

}  // namespace spk::check_internal
