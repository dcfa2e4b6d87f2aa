#include "safetensors/header.h"

#include <algorithm>
#include <limits>

#include "base/checked_math.h"
#include "safetensors/json_util.h"

namespace spk {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kMetadataKey = "__metadata__";

// Builds messages "<file>: tensor '<name>': <what>".
class Errors {
 public:
  explicit Errors(std::string_view file) : file_(file) {}
  Status File(const std::string& what) const { return Status::InvalidInput(file_ + ": " + what); }
  Status Tensor(std::string_view name, const std::string& what) const {
    return Status::InvalidInput(file_ + ": tensor '" + std::string(name) + "': " + what);
  }

 private:
  std::string file_;
};

std::string OffsetsToString(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// A non-negative JSON integer (what serde's usize accepts: not -0, not 1.0, not above 2^64-1).
bool IsUnsignedInteger(const Json& v) { return v.is_number_unsigned(); }

Status ParseMetadata(const Errors& errors, const Json& value, SafetensorsHeader* header) {
  if (value.is_null()) return Status::Ok();  // serde reads null as "no metadata"
  if (!value.is_object()) {
    return errors.File("__metadata__ must be an object of strings, found " +
                       std::string(value.type_name()));
  }
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) {
      return errors.File("__metadata__ value for '" + key + "' must be a string, found " +
                         std::string(v.type_name()));
    }
    header->metadata.emplace_back(key, v.get<std::string>());
  }
  return Status::Ok();
}

// The field `field` of a tensor entry, or an error when it is missing.
Result<const Json*> RequiredField(const Errors& errors, const std::string& name, const Json& entry,
                                  const char* field) {
  auto it = entry.find(field);
  if (it == entry.end()) {
    return errors.Tensor(name, std::string("missing field \"") + field +
                                   "\" (a tensor entry needs dtype, shape and data_offsets)");
  }
  return &*it;
}

Result<TensorEntry> ParseTensorEntry(const Errors& errors, const std::string& name,
                                     const Json& entry) {
  if (!entry.is_object()) {
    return errors.Tensor(name,
                         "entry must be an object with dtype, shape and data_offsets, found " +
                             std::string(entry.type_name()));
  }
  TensorEntry t;
  t.name = name;

  SPK_ASSIGN_OR_RETURN(const Json* dtype, RequiredField(errors, name, entry, "dtype"));
  if (!dtype->is_string()) return errors.Tensor(name, "dtype must be a string");
  std::optional<DType> parsed = DTypeFromName(dtype->get_ref<const std::string&>());
  if (!parsed) {
    return errors.Tensor(name, "unknown dtype \"" + dtype->get<std::string>() + "\"");
  }
  t.dtype = *parsed;

  SPK_ASSIGN_OR_RETURN(const Json* shape, RequiredField(errors, name, entry, "shape"));
  if (!shape->is_array()) return errors.Tensor(name, "shape must be an array of integers");
  for (const Json& d : *shape) {
    if (!IsUnsignedInteger(d)) {
      return errors.Tensor(name, "shape must hold non-negative integers, found " + d.dump());
    }
    const uint64_t dim = d.get<uint64_t>();
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return errors.Tensor(name, "dimension " + std::to_string(dim) + " is larger than 2^63-1");
    }
    t.shape.push_back(static_cast<int64_t>(dim));
  }

  SPK_ASSIGN_OR_RETURN(const Json* offsets, RequiredField(errors, name, entry, "data_offsets"));
  if (!offsets->is_array() || offsets->size() != 2 || !IsUnsignedInteger((*offsets)[0]) ||
      !IsUnsignedInteger((*offsets)[1])) {
    return errors.Tensor(
        name,
        "data_offsets must be two non-negative integers [BEGIN, END], found " + offsets->dump());
  }
  t.begin = (*offsets)[0].get<uint64_t>();
  t.end = (*offsets)[1].get<uint64_t>();
  if (t.end < t.begin) {
    return errors.Tensor(
        name, "data_offsets " + OffsetsToString(t.begin, t.end) + " end before they begin");
  }
  // Unknown fields are ignored, as the reference (serde without deny_unknown_fields) does.
  return t;
}

// shape x dtype must equal END - BEGIN, computed without overflow (reference: Metadata::validate).
Status CheckTensorSize(const Errors& errors, const TensorEntry& t) {
  const std::string described =
      "shape " + ShapeToString(t.shape) + " of " + std::string(DTypeName(t.dtype));
  uint64_t elements, bits;
  if (!CheckedElementCount(t.shape, &elements) ||
      !CheckedMul(elements, DTypeBits(t.dtype), &bits)) {
    return errors.Tensor(t.name, described + " is too large (the byte size overflows 64 bits)");
  }
  if (bits % 8 != 0) {
    return errors.Tensor(t.name, described + " holds " + std::to_string(bits) +
                                     " bits, which does not end on a byte boundary");
  }
  if (bits / 8 != t.nbytes()) {
    return errors.Tensor(t.name, "data_offsets " + OffsetsToString(t.begin, t.end) + " hold " +
                                     std::to_string(t.nbytes()) + " bytes but " + described +
                                     " needs " + std::to_string(bits / 8));
  }
  return Status::Ok();
}

// Sorted by offsets, the tensors must cover [0, total) exactly: each begins where the previous
// ended. Returns the end of the last tensor. Empty tensors may share an offset (the reference
// allows it).
Result<uint64_t> CheckTiling(const Errors& errors, const std::vector<TensorEntry>& tensors) {
  uint64_t cursor = 0;
  const TensorEntry* previous = nullptr;
  for (const TensorEntry& t : tensors) {
    if (t.begin > cursor) {
      std::string after =
          previous ? "tensor '" + previous->name + "', which ends at byte " + std::to_string(cursor)
                   : "the start of the data buffer";
      return errors.Tensor(t.name, "data_offsets " + OffsetsToString(t.begin, t.end) +
                                       " leave a gap of " + std::to_string(t.begin - cursor) +
                                       " bytes after " + after);
    }
    if (t.begin < cursor) {
      return errors.Tensor(t.name, "data_offsets " + OffsetsToString(t.begin, t.end) +
                                       " overlap tensor '" + previous->name + "' at " +
                                       OffsetsToString(previous->begin, previous->end));
    }
    cursor = t.end;
    previous = &t;
  }
  return cursor;
}

Status CheckBufferEnd(const Errors& errors, const std::vector<TensorEntry>& tensors,
                      uint64_t data_end, uint64_t buffer_size) {
  if (data_end == buffer_size) return Status::Ok();
  if (data_end < buffer_size) {
    const std::string last = tensors.empty() ? "the header (there are no tensors)"
                                             : "the last tensor '" + tensors.back().name + "'";
    return errors.File(std::to_string(buffer_size - data_end) + " unexpected bytes after " + last +
                       "; the data buffer must end where the last tensor ends");
  }
  return errors.Tensor(tensors.back().name, "data_offsets end at byte " + std::to_string(data_end) +
                                                " of the data buffer, but the file holds only " +
                                                std::to_string(buffer_size) +
                                                " bytes of data (is it truncated?)");
}

}  // namespace

uint64_t TensorEntry::num_elements() const {
  uint64_t n = 0;
  bool ok = CheckedElementCount(shape, &n);
  assert(ok && "num_elements of an unvalidated tensor entry");
  (void)ok;
  return n;
}

const TensorEntry* SafetensorsHeader::Find(std::string_view name) const {
  for (const TensorEntry& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string ShapeToString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view file_label,
                                                 std::string_view header_json, uint64_t file_size) {
  const Errors errors(file_label);
  if (header_json.size() > kMaxSafetensorsHeaderSize) {
    return errors.File("header of " + std::to_string(header_json.size()) +
                       " bytes is larger than the limit of 100000000 bytes");
  }
  SafetensorsHeader header;
  header.data_start = 8 + header_json.size();
  if (header.data_start > file_size) {
    return errors.File("header of " + std::to_string(header_json.size()) +
                       " bytes runs past the end of the file (" + std::to_string(file_size) +
                       " bytes); the file is truncated or not a safetensors file");
  }
  if (std::optional<std::string> bad = FindInvalidUtf8(header_json)) {
    return errors.File("header is not valid UTF-8: " + *bad);
  }
  SPK_ASSIGN_OR_RETURN(Json root,
                       ParseJsonStrict(std::string(file_label) + ": header", header_json));
  if (!root.is_object()) {
    return errors.File("header must be a JSON object, found " + std::string(root.type_name()));
  }
  for (const auto& [key, value] : root.items()) {
    if (key == kMetadataKey) {
      SPK_RETURN_IF_ERROR(ParseMetadata(errors, value, &header));
      continue;
    }
    SPK_ASSIGN_OR_RETURN(TensorEntry t, ParseTensorEntry(errors, key, value));
    header.tensors.push_back(std::move(t));
  }
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const TensorEntry& a, const TensorEntry& b) {
              return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
            });
  SPK_ASSIGN_OR_RETURN(uint64_t data_end, CheckTiling(errors, header.tensors));
  for (const TensorEntry& t : header.tensors) SPK_RETURN_IF_ERROR(CheckTensorSize(errors, t));
  SPK_RETURN_IF_ERROR(
      CheckBufferEnd(errors, header.tensors, data_end, file_size - header.data_start));
  return header;
}

}  // namespace spk
