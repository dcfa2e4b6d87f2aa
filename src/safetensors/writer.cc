#include "safetensors/writer.h"

#include <algorithm>

#include "base/checked_math.h"
#include "base/endian.h"
#include "safetensors/header.h"
#include "safetensors/json_util.h"

namespace spk {
namespace {

Status CheckUtf8(const std::string& what, std::string_view text) {
  if (std::optional<std::string> bad = FindInvalidUtf8(text)) {
    return Status::InvalidInput(what + " is not valid UTF-8: " + *bad);
  }
  return Status::Ok();
}

// Bytes of a tensor of `spec`, or an error naming it.
Result<uint64_t> ByteSize(const TensorSpec& spec) {
  uint64_t elements, bits;
  if (!CheckedElementCount(spec.shape, &elements) ||
      !CheckedMul(elements, DTypeBits(spec.dtype), &bits)) {
    return Status::InvalidInput("tensor '" + spec.name + "': shape has a negative dimension or " +
                                "its byte size overflows 64 bits");
  }
  if (bits % 8 != 0) {
    return Status::InvalidInput("tensor '" + spec.name + "': " + std::to_string(elements) + " " +
                                std::string(DTypeName(spec.dtype)) +
                                " elements do not fill whole bytes");
  }
  return bits / 8;
}

void AppendMetadata(std::string* json,
                    const std::vector<std::pair<std::string, std::string>>& metadata) {
  json->append("\"__metadata__\":{");
  for (size_t i = 0; i < metadata.size(); ++i) {
    if (i > 0) json->push_back(',');
    AppendJsonString(json, metadata[i].first);
    json->push_back(':');
    AppendJsonString(json, metadata[i].second);
  }
  json->push_back('}');
}

// "name":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]}
void AppendTensor(std::string* json, const TensorSpec& spec, uint64_t begin, uint64_t end) {
  AppendJsonString(json, spec.name);
  json->append(":{\"dtype\":\"").append(DTypeName(spec.dtype)).append("\",\"shape\":[");
  for (size_t i = 0; i < spec.shape.size(); ++i) {
    if (i > 0) json->push_back(',');
    json->append(std::to_string(spec.shape[i]));
  }
  json->append("],\"data_offsets\":[")
      .append(std::to_string(begin))
      .append(",")
      .append(std::to_string(end))
      .append("]}");
}

}  // namespace

void SortLikeReference(std::vector<TensorSpec>& specs) {
  std::stable_sort(specs.begin(), specs.end(), [](const TensorSpec& a, const TensorSpec& b) {
    if (a.dtype != b.dtype) return a.dtype > b.dtype;
    return a.name < b.name;
  });
}

Result<SafetensorsLayout> SafetensorsLayout::Plan(
    std::vector<TensorSpec> tensors_in_data_order,
    std::vector<std::pair<std::string, std::string>> metadata) {
  SafetensorsLayout layout;
  layout.tensors_ = std::move(tensors_in_data_order);
  std::string json = "{";
  if (!metadata.empty()) {
    for (const auto& [key, value] : metadata) {
      SPK_RETURN_IF_ERROR(CheckUtf8("__metadata__ key '" + key + "'", key));
      SPK_RETURN_IF_ERROR(CheckUtf8("__metadata__ value for '" + key + "'", value));
    }
    AppendMetadata(&json, metadata);
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < layout.tensors_.size(); ++i) {
    const TensorSpec& spec = layout.tensors_[i];
    SPK_RETURN_IF_ERROR(CheckUtf8("tensor name '" + spec.name + "'", spec.name));
    if (spec.name == "__metadata__") {
      return Status::InvalidInput(
          "a tensor cannot be named '__metadata__' (reserved by the format)");
    }
    if (!layout.index_.emplace(spec.name, i).second) {
      return Status::InvalidInput("tensor '" + spec.name + "' appears twice; names must be unique");
    }
    SPK_ASSIGN_OR_RETURN(uint64_t nbytes, ByteSize(spec));
    uint64_t end;
    if (!CheckedAdd(offset, nbytes, &end)) {
      return Status::InvalidInput("tensor '" + spec.name + "': the file would exceed 2^64 bytes");
    }
    if (json.size() > 1) json.push_back(',');
    AppendTensor(&json, spec, offset, end);
    layout.placements_.push_back({offset, nbytes});
    offset = end;
  }
  json.push_back('}');
  json.resize((json.size() + 7) / 8 * 8, ' ');  // the data buffer starts 8-byte aligned
  if (json.size() > kMaxSafetensorsHeaderSize) {
    return Status::InvalidInput("the header would be " + std::to_string(json.size()) +
                                " bytes, more than readers accept (100000000); split the tensors "
                                "over several shards");
  }

  layout.header_bytes_.resize(8);
  StoreLE64(layout.header_bytes_.data(), json.size());
  layout.header_bytes_ += json;
  if (!CheckedAdd(layout.header_bytes_.size(), offset, &layout.file_size_)) {
    return Status::InvalidInput("the planned file would exceed 2^64 bytes");
  }
  return layout;
}

const SafetensorsLayout::Placement* SafetensorsLayout::FindPlacement(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &placements_[it->second];
}

Result<uint64_t> SafetensorsLayout::AbsoluteOffset(std::string_view name) const {
  const Placement* p = FindPlacement(name);
  if (p == nullptr) {
    return Status::NotFound("tensor '" + std::string(name) + "' is not in the planned file");
  }
  return data_start() + p->begin;
}

uint64_t SafetensorsLayout::TensorBytes(std::string_view name) const {
  const Placement* p = FindPlacement(name);
  assert(p != nullptr && "TensorBytes of a tensor that is not in the layout");
  return p ? p->nbytes : 0;
}

Status WriteSafetensorsHeader(WritableFile& f, const SafetensorsLayout& layout) {
  const std::string& bytes = layout.header_bytes();
  return f.WriteAt(
      0, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

}  // namespace spk
