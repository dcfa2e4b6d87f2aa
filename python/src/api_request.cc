// The table's machinery (python/src/api.h): each ParamType's Python annotation and JSON type, the
// table as JSON for python/generate_api.py and _call.py, and a request checked against its row.
// The rows themselves are in api.cc.
//
// Errors: a request that does not fit its row is Usage naming the function and the parameter; an
// accessor asked for a name its row does not declare throws (a bug in that row's Run, reported by
// module.cc as an internal error).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

#include "api.h"

namespace spk::python {
namespace {

using Json = nlohmann::json;

// One row per ParamType: its Python annotation, the JSON value a request carries for it, and how
// the package passes an argument of it (_call.py: "path" through os.fspath, "paths" each element,
// "list" as a list, "progress" kept in Python, "value" as it is).
enum class JsonValue { kString, kInteger, kNumber, kBoolean, kStrings, kNone };
struct ParamTypeRow {
  ParamType type;
  std::string_view annotation;
  JsonValue json;
  bool optional;
  std::string_view passed_as;
};
constexpr std::array kParamTypes = {
    ParamTypeRow{ParamType::kPath, "PathLike", JsonValue::kString, false, "path"},
    ParamTypeRow{ParamType::kOptionalPath, "Optional[PathLike]", JsonValue::kString, true, "path"},
    ParamTypeRow{ParamType::kStr, "str", JsonValue::kString, false, "value"},
    ParamTypeRow{ParamType::kOptionalStr, "Optional[str]", JsonValue::kString, true, "value"},
    ParamTypeRow{ParamType::kInt, "int", JsonValue::kInteger, false, "value"},
    ParamTypeRow{ParamType::kOptionalInt, "Optional[int]", JsonValue::kInteger, true, "value"},
    ParamTypeRow{ParamType::kFloat, "float", JsonValue::kNumber, false, "value"},
    ParamTypeRow{ParamType::kBool, "bool", JsonValue::kBoolean, false, "value"},
    ParamTypeRow{ParamType::kStrList, "Sequence[str]", JsonValue::kStrings, false, "list"},
    ParamTypeRow{ParamType::kPathList, "Sequence[PathLike]", JsonValue::kStrings, false, "paths"},
    ParamTypeRow{ParamType::kProgress, "ProgressArg", JsonValue::kNone, false, "progress"},
};

const ParamTypeRow& RowOf(ParamType t) {
  for (const ParamTypeRow& row : kParamTypes) {
    if (row.type == t) return row;
  }
  return kParamTypes.back();  // unreachable: every ParamType has its row
}

// Whether `v` is a JSON value of type `t` (null where the type is optional).
bool HasType(const Json& v, ParamType t) {
  const ParamTypeRow& row = RowOf(t);
  if (row.optional && v.is_null()) return true;
  switch (row.json) {
    case JsonValue::kString:
      return v.is_string();
    case JsonValue::kInteger:
      return v.is_number_integer();
    case JsonValue::kNumber:
      return v.is_number();
    case JsonValue::kBoolean:
      return v.is_boolean();
    case JsonValue::kStrings:
      return v.is_array() &&
             std::all_of(v.begin(), v.end(), [](const Json& e) { return e.is_string(); });
    case JsonValue::kNone:
      return false;
  }
  return false;
}

}  // namespace

nlohmann::ordered_json ApiCommandsJson() {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const ApiCommand& c : ApiCommands()) {
    nlohmann::ordered_json params = nlohmann::ordered_json::array();
    for (const ApiParam& p : c.params) {
      params.push_back({{"name", p.name},
                        {"type", RowOf(p.type).annotation},
                        {"passed_as", RowOf(p.type).passed_as},
                        {"default", p.python_default},
                        {"doc", p.doc}});
    }
    nlohmann::ordered_json returns = nlohmann::ordered_json::array();
    for (const ApiReturn& r : c.returns) returns.push_back({{"type", r.type}, {"when", r.when}});
    out.push_back({{"name", c.name},
                   {"doc", c.doc},
                   {"params", params},
                   {"returns", returns},
                   {"returns_doc", c.returns_doc},
                   {"raises_doc", c.raises_doc}});
  }
  return out;
}

Result<ApiRequest> ApiRequest::Parse(const ApiCommand& command, std::string_view json_text) {
  Json values = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!values.is_object()) {
    return Status::Usage(fmt::format("{}(): the request is not a JSON object", command.name));
  }
  for (const auto& [key, value] : values.items()) {
    const ApiParam* declared = nullptr;
    for (const ApiParam& p : command.params) {
      if (p.name == key && p.type != ParamType::kProgress) declared = &p;
    }
    if (declared == nullptr) {
      return Status::Usage(fmt::format("{}(): no parameter '{}'", command.name, key));
    }
    if (!HasType(value, declared->type)) {
      return Status::Usage(fmt::format("{}(): {} must be {}, not {}", command.name, key,
                                       RowOf(declared->type).annotation, value.dump()));
    }
  }
  for (const ApiParam& p : command.params) {
    if (p.type != ParamType::kProgress && !values.contains(std::string(p.name))) {
      return Status::Usage(fmt::format("{}(): parameter '{}' missing", command.name, p.name));
    }
  }
  return ApiRequest(std::move(values));
}

const Json& ApiRequest::Get(std::string_view name) const {
  // A name the row does not declare is a bug in its Run function: .at() throws, and the module
  // reports it as a RuntimeError (an internal error) rather than reading a default.
  return values_.at(std::string(name));
}

std::string ApiRequest::Str(std::string_view name) const { return Get(name).get<std::string>(); }

std::optional<std::string> ApiRequest::OptionalStr(std::string_view name) const {
  const Json& v = Get(name);
  if (v.is_null()) return std::nullopt;
  return v.get<std::string>();
}

int64_t ApiRequest::Int(std::string_view name) const { return Get(name).get<int64_t>(); }

std::optional<int64_t> ApiRequest::OptionalInt(std::string_view name) const {
  const Json& v = Get(name);
  if (v.is_null()) return std::nullopt;
  return v.get<int64_t>();
}

double ApiRequest::Float(std::string_view name) const { return Get(name).get<double>(); }

bool ApiRequest::Bool(std::string_view name) const { return Get(name).get<bool>(); }

std::vector<std::string> ApiRequest::StrList(std::string_view name) const {
  return Get(name).get<std::vector<std::string>>();
}

}  // namespace spk::python

namespace spk::python {

Result<int> IntOf(std::string_view name, int64_t value) {
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
    return Status::Usage(fmt::format("{} = {} is out of range", name, value));
  }
  return static_cast<int>(value);
}

Status ApiRequest::Read(std::string_view name, std::string* out) const {
  if (auto value = OptionalStr(name)) *out = std::move(*value);
  return Status::Ok();
}

Status ApiRequest::Read(std::string_view name, std::optional<int64_t>* out) const {
  *out = OptionalInt(name);
  return Status::Ok();
}

Status ApiRequest::Read(std::string_view name, int* out) const {
  if (auto value = OptionalInt(name)) {
    SPK_ASSIGN_OR_RETURN(*out, IntOf(name, *value));
  }
  return Status::Ok();
}

Status ApiRequest::Read(std::string_view name, std::vector<std::string>* out) const {
  *out = StrList(name);
  return Status::Ok();
}

Status ApiRequest::Read(std::string_view name, bool* out) const {
  *out = Bool(name);
  return Status::Ok();
}

Result<uint64_t> SeedOf(std::string_view name, int64_t value) {
  if (value < 0) return Status::Usage(fmt::format("{} = {} is negative", name, value));
  return static_cast<uint64_t>(value);
}

Status ApiRequest::Read(std::string_view name, int64_t* out) const {
  if (auto value = OptionalInt(name)) *out = *value;
  return Status::Ok();
}

Status ApiRequest::Read(std::string_view name, uint64_t* out) const {
  if (auto value = OptionalInt(name)) {
    SPK_ASSIGN_OR_RETURN(*out, SeedOf(name, *value));
  }
  return Status::Ok();
}

Status ApiRequest::Read(std::string_view name, double* out) const {
  const Json& value = Get(name);
  if (!value.is_null()) *out = value.get<double>();
  return Status::Ok();
}

}  // namespace spk::python
