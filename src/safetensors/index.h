// model.safetensors.index.json: which shard file holds each tensor of a sharded checkpoint.
//
// Parsing rejects anything a loader could misread: a missing or non-object "weight_map", non-string
// values, and shard names that are not plain file names inside the checkpoint folder (empty, ".",
// "..", containing '/' or '\\', hence also absolute paths), duplicate keys. Serializing writes what
// transformers' save_pretrained writes: json.dumps(index, indent=2, sort_keys=True) + "\n".
// Values; pure functions; thread-safe. Errors: InvalidInput prefixed with the file label.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace spk {

inline constexpr std::string_view kShardIndexFileName = "model.safetensors.index.json";

struct ShardIndex {
  uint64_t total_size = 0;                        // metadata.total_size (0 when absent)
  std::map<std::string, std::string> weight_map;  // tensor name -> shard file name
  // Every other key of "metadata" (e.g. transformers' total_parameters); an object or null.
  nlohmann::json extra_metadata;
};

Result<ShardIndex> ParseShardIndex(std::string_view file_label, std::string_view json_text);
std::string SerializeShardIndex(const ShardIndex& index);

}  // namespace spk
