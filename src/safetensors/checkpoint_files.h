// SafetensorsCheckpoint: the .safetensors files of one Hugging Face model folder, opened and
// cross-checked, with a tensor-name lookup across shards.
//
// Which files: model.safetensors.index.json when present (sharded; only the shards it names, as
// vLLM loads only those), else model.safetensors, else the folder's only *.safetensors file.
// Sharded checks: every shard the index names exists; every tensor the index lists is in its shard;
// every tensor of a shard is listed for that shard. A *.safetensors file the index does not name is
// not an error but gives a warning (vLLM would silently skip it).
// Ownership: owns its readers; Located::entry points into them and lives as long as the checkpoint
// (also across moves). The FileSystem must outlive it.
// Thread safety: immutable after Open; const methods may be called concurrently.
// Errors: NotFound for a missing folder or shard, InvalidInput for inconsistent files, IoError.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "io/file.h"
#include "safetensors/header.h"
#include "safetensors/index.h"
#include "safetensors/reader.h"

namespace spk {

class SafetensorsCheckpoint {
 public:
  static Result<SafetensorsCheckpoint> Open(FileSystem* fs, const std::string& dir);

  struct Located {
    size_t shard;
    const TensorEntry* entry;
  };

  const std::string& dir() const { return dir_; }
  // File names (not paths) of the shards, sorted; index i matches shard(i).
  const std::vector<std::string>& shard_files() const { return shard_files_; }
  const SafetensorsReader& shard(size_t i) const { return shards_[i]; }
  size_t num_shards() const { return shards_.size(); }
  std::optional<Located> Find(std::string_view tensor) const;
  // True when the folder has a model.safetensors.index.json.
  bool sharded() const { return index_.has_value(); }
  const std::optional<ShardIndex>& index() const { return index_; }
  // Human-readable notes about files vLLM would ignore.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  SafetensorsCheckpoint() = default;
  Status OpenShards(FileSystem* fs);
  Status CheckAgainstIndex() const;
  void BuildLookup();

  std::string dir_;
  std::vector<std::string> shard_files_;
  std::vector<SafetensorsReader> shards_;
  std::optional<ShardIndex> index_;
  std::vector<std::string> warnings_;
  std::unordered_map<std::string, Located> lookup_;
};

}  // namespace spk
