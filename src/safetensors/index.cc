#include "safetensors/index.h"

#include <cmath>

#include "safetensors/json_util.h"

namespace spk {
namespace {

using OrderedJson = nlohmann::ordered_json;

// Why `name` is not a plain file name inside the checkpoint folder, or empty when it is.
std::string WhyNotPlainFileName(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name == "." || name == "..") return "is not a file name";
  if (name.find('/') != std::string::npos)
    return "contains '/' (shards must be in the folder itself)";
  if (name.find('\\') != std::string::npos) return "contains '\\'";
  if (name.find('\0') != std::string::npos) return "contains a NUL byte";
  return "";
}

// total_size as transformers writes it (an integer); an integral float is accepted too because some
// tools write e.g. 1234.0.
Result<uint64_t> ParseTotalSize(std::string_view label, const OrderedJson& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (d >= 0 && d < 18446744073709551616.0 && std::floor(d) == d) return static_cast<uint64_t>(d);
  }
  return Status::InvalidInput(std::string(label) +
                              ": metadata.total_size must be a non-negative integer, found " +
                              v.dump());
}

}  // namespace

Result<ShardIndex> ParseShardIndex(std::string_view file_label, std::string_view json_text) {
  const std::string label(file_label);
  if (std::optional<std::string> bad = FindInvalidUtf8(json_text)) {
    return Status::InvalidInput(label + ": not valid UTF-8: " + *bad);
  }
  SPK_ASSIGN_OR_RETURN(OrderedJson root, ParseJsonStrict(label, json_text));
  if (!root.is_object()) {
    return Status::InvalidInput(label + ": must be a JSON object with a \"weight_map\"");
  }
  ShardIndex index;
  auto metadata = root.find("metadata");
  if (metadata != root.end() && !metadata->is_null()) {
    if (!metadata->is_object()) {
      return Status::InvalidInput(label + ": \"metadata\" must be an object");
    }
    index.extra_metadata = nlohmann::json::object();
    for (const auto& [key, value] : metadata->items()) {
      if (key == "total_size") {
        SPK_ASSIGN_OR_RETURN(index.total_size, ParseTotalSize(label, value));
      } else {
        // Round-trips through text: ordered_json and json are distinct types.
        index.extra_metadata[key] = nlohmann::json::parse(value.dump());
      }
    }
  }
  auto weight_map = root.find("weight_map");
  if (weight_map == root.end() || !weight_map->is_object()) {
    return Status::InvalidInput(label +
                                ": missing \"weight_map\" object (tensor name -> shard file)");
  }
  for (const auto& [tensor, shard] : weight_map->items()) {
    if (!shard.is_string()) {
      return Status::InvalidInput(label + ": weight_map entry for tensor '" + tensor +
                                  "' must be a file name string, found " + shard.dump());
    }
    const std::string& file = shard.get_ref<const std::string&>();
    if (std::string why = WhyNotPlainFileName(file); !why.empty()) {
      return Status::InvalidInput(
          label + ": weight_map entry for tensor '" + tensor + "': shard '" + file + "' " + why +
          "; it must be a plain file name inside the " + "checkpoint folder");
    }
    index.weight_map.emplace(tensor, file);
  }
  return index;
}

std::string SerializeShardIndex(const ShardIndex& index) {
  nlohmann::json metadata =
      index.extra_metadata.is_object() ? index.extra_metadata : nlohmann::json::object();
  metadata["total_size"] = index.total_size;
  nlohmann::json root;
  root["metadata"] = std::move(metadata);
  root["weight_map"] = index.weight_map;
  // nlohmann::json keeps object keys sorted (std::map), like sort_keys=True; ensure_ascii like
  // Python.
  return root.dump(2, ' ', /*ensure_ascii=*/true) + "\n";
}

}  // namespace spk
