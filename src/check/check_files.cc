// The load steps files and index of the CheckView: which shards vLLM loads, the shard index, the
// safetensors rules of every file.
#include "check/check_rules.h"

#include <algorithm>

namespace spk::check_internal {

namespace {

Status OpenShard(CheckView* v, FindingSink& sink, const std::string& file, bool listed);

}  // namespace

// A folder or index that cannot be read is an error of the run, not a finding: nothing can be said
// about a checkpoint whose files the disk does not give back.
Status LoadFiles(CheckView* v, FindingSink& sink) {
  sink.Enter(RuleNamed("files"));
  FileSystem* fs = v->fs;
  const std::string& dir = v->dir;
  SPK_ASSIGN_OR_RETURN(std::vector<std::string> listing, fs->ListDirectory(dir));
  std::vector<std::string> present;
  for (const std::string& name : listing) {
    if (HasSuffix(name, ".safetensors") && fs->FileExists(dir + "/" + name)) {
      present.push_back(name);
    }
  }
  std::sort(present.begin(), present.end());
  std::string index_path = dir + "/" + std::string(kShardIndexFileName);
  if (fs->FileExists(index_path)) {
    SPK_ASSIGN_OR_RETURN(std::string text, fs->ReadFile(index_path));
    auto parsed = ParseShardIndex(index_path, text);
    if (!parsed.ok()) {
      sink.Add(
          FindingCode::kIndexInvalid, "", std::string(kShardIndexFileName),
          parsed.status().message(),
          "rewrite the index: {\"metadata\": {\"total_size\": N}, \"weight_map\": {tensor: file}}");
    } else {
      v->index = std::move(parsed).value();
    }
  }
  if (!v->index) {
    if (present.empty()) {
      sink.Add(FindingCode::kNoSafetensors, "", "",
               "the folder holds no .safetensors file; vLLM has nothing to load",
               "save the weights as safetensors (model.safetensors or shards with an index)");
      return Status::Ok();
    }
    if (present.size() > 1) {
      sink.Add(FindingCode::kIndexMissing, "", "",
               fmt::format("{} .safetensors files but no {}: vLLM loads them all, transformers "
                           "loads none",
                           present.size(), kShardIndexFileName),
               "write model.safetensors.index.json");
    }
    for (const std::string& f : present) SPK_RETURN_IF_ERROR(OpenShard(v, sink, f, true));
    return Status::Ok();
  }
  std::map<std::string, size_t> listed;  // file -> tensors the index places there
  for (const auto& [tensor, file] : v->index->weight_map) listed[file]++;
  for (const auto& [file, count] : listed) {
    if (std::find(present.begin(), present.end(), file) == present.end()) {
      sink.Add(
          FindingCode::kIndexFileMissing, "", file,
          fmt::format("the index places {} tensor(s) in {}, which does not exist; vLLM fails to "
                      "load the checkpoint",
                      count, file),
          "copy the missing shard into the folder, or rewrite the index");
    } else {
      SPK_RETURN_IF_ERROR(OpenShard(v, sink, file, true));
    }
  }
  for (const std::string& file : present) {
    if (!listed.count(file)) SPK_RETURN_IF_ERROR(OpenShard(v, sink, file, false));
  }
  sink.Enter(RuleNamed("index"));
  IndexAgainstShards(*v, sink);
  return Status::Ok();
}

// A shard the disk fails to give back ends the run (IoError, exit 3) like the index does; only a
// file that was read and does not conform is a finding about the checkpoint.
namespace {

Status OpenShard(CheckView* v, FindingSink& sink, const std::string& file, bool listed) {
  FileSystem* fs = v->fs;
  const std::string& dir = v->dir;
  auto reader = SafetensorsReader::Open(fs, dir + "/" + file);
  if (!reader.ok()) {
    if (reader.status().code() == StatusCode::kIoError) return reader.status();
    sink.Add(FindingCode::kSafetensorsInvalid, "", file, reader.status().message(),
             "rewrite the file with a conforming safetensors writer (docs/formats.md section 1)");
    v->unreadable_shards.push_back(file);
    return Status::Ok();
  }
  const auto& metadata = reader->header().metadata;
  auto format = std::find_if(metadata.begin(), metadata.end(),
                             [](const auto& kv) { return kv.first == "format"; });
  // No __metadata__ at all is accepted by every loader; one without format "pt" is not
  // (transformers 4.x raises "does not contain the valid metadata").
  if (!metadata.empty() && (format == metadata.end() || format->second != "pt")) {
    sink.Add(FindingCode::kSafetensorsMetadataFormat, "", file,
             "__metadata__ lacks \"format\": \"pt\"; transformers 4.x refuses to load the file",
             "write __metadata__ {\"format\": \"pt\"}");
  }
  if (!listed) {
    v->unlisted.emplace_back(file, std::move(reader).value());
    return Status::Ok();
  }
  size_t shard = v->readers.size();
  v->readers.push_back(std::move(reader).value());
  v->reader_files.push_back(file);
  for (const TensorEntry& t : v->readers.back().header().tensors) {
    auto [it, inserted] = v->tensors.emplace(t.name, Located{shard, &t});
    if (!inserted) {
      sink.Add(FindingCode::kDuplicateTensor, t.name, file,
               fmt::format("tensor is also in {}; which copy vLLM keeps depends on load order",
                           v->reader_files[it->second.shard]),
               "keep one copy and fix the index");
    }
  }
  return Status::Ok();
}

}  // namespace

void IndexAgainstShards(const CheckView& v, FindingSink& sink) {
  for (const auto& [file, reader] : v.unlisted) {
    size_t hidden = 0;
    for (const TensorEntry& t : reader.header().tensors) hidden += !v.tensors.count(t.name);
    sink.Add(
        FindingCode::kShardNotInIndex, hidden > 0 ? Severity::kError : Severity::kWarning, "", file,
        fmt::format("{} is not named in {}: vLLM silently skips it{}", file, kShardIndexFileName,
                    hidden > 0 ? fmt::format(", and {} tensor(s) exist only there", hidden) : ""),
        hidden > 0 ? "add its tensors to the index's weight_map" : "delete the stray file");
  }
  for (const auto& [tensor, file] : v.index->weight_map) {
    auto it = v.tensors.find(tensor);
    bool file_open =
        std::find(v.reader_files.begin(), v.reader_files.end(), file) != v.reader_files.end();
    if (it == v.tensors.end() && file_open) {
      sink.Add(FindingCode::kIndexTensorMissing, tensor, file,
               fmt::format("the index places the tensor in {}, which does not contain it", file),
               "rewrite the index from the shards' headers");
    } else if (it != v.tensors.end() && v.reader_files[it->second.shard] != file) {
      sink.Add(FindingCode::kIndexWrongShard, tensor, v.reader_files[it->second.shard],
               fmt::format("the index places the tensor in {}", file),
               "rewrite the index from the shards' headers");
    }
  }
  for (const auto& [tensor, located] : v.tensors) {
    if (!v.index->weight_map.count(tensor)) {
      sink.Add(FindingCode::kTensorNotInIndex, tensor, v.reader_files[located.shard],
               "not listed in the index's weight_map (vLLM loads it with its shard; other loaders "
               "may not)",
               "add it to the weight_map");
    }
  }
}

}  // namespace spk::check_internal
