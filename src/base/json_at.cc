#include "base/json_at.h"

#include <cmath>
#include <utility>

namespace spk {
namespace {

using nlohmann::json;

// "a string", "an array", ...: the kind of a value as the messages name it.
std::string KindOf(const json* value) {
  if (value == nullptr) return "nothing";
  switch (value->type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return "a number";
    default:
      return value->type_name();
  }
}

}  // namespace

const json& FieldOrNull(const json& object, std::string_view key) {
  static const json kNull;
  if (!object.is_object()) return kNull;
  auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

JsonAt::JsonAt(const json& root, std::string file) : value_(&root), file_(std::move(file)) {}

JsonAt::JsonAt(const json* value, const JsonAt& parent, std::string path)
    : value_(value), file_(parent.file_), path_(std::move(path)) {}

JsonAt JsonAt::Key(std::string_view key) const {
  std::string path = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  const json* child = nullptr;
  if (value_ != nullptr && value_->is_object()) {
    auto it = value_->find(key);
    if (it != value_->end()) child = &*it;
  }
  JsonAt at(child, *this, std::move(path));
  if (parent_error_) {
    at.parent_error_ = parent_error_;
  } else if (Status s = Expect(value_ != nullptr && value_->is_object(), "an object"); !s.ok()) {
    at.parent_error_ = std::move(s);
  }
  return at;
}

JsonAt JsonAt::Index(size_t index) const {
  std::string path = path_ + "[" + std::to_string(index) + "]";
  const json* child = nullptr;
  if (value_ != nullptr && value_->is_array() && index < value_->size()) child = &(*value_)[index];
  JsonAt at(child, *this, std::move(path));
  if (parent_error_) {
    at.parent_error_ = parent_error_;
  } else if (Status s = Expect(value_ != nullptr && value_->is_array(), "an array"); !s.ok()) {
    at.parent_error_ = std::move(s);
  }
  return at;
}

Status JsonAt::Error(std::string_view what) const {
  std::string where = path_.empty() ? file_ : file_ + ": " + path_;
  return Status::InvalidInput(where + ": " + std::string(what));
}

Status JsonAt::Expect(bool ok, std::string_view expected) const {
  if (parent_error_) return *parent_error_;
  if (ok) return Status::Ok();
  return Error("expected " + std::string(expected) + ", got " + KindOf(value_));
}

Result<std::string> JsonAt::String() const {
  SPK_RETURN_IF_ERROR(Expect(value_ != nullptr && value_->is_string(), "a string"));
  return value_->get<std::string>();
}

Result<double> JsonAt::Number() const {
  SPK_RETURN_IF_ERROR(Expect(value_ != nullptr && value_->is_number(), "a number"));
  return value_->get<double>();
}

Result<std::optional<double>> JsonAt::NumberOrNull() const {
  if (!parent_error_ && null_or_missing()) return std::optional<double>();
  SPK_RETURN_IF_ERROR(Expect(value_ != nullptr && value_->is_number(), "a number or null"));
  return std::optional<double>(value_->get<double>());
}

Result<bool> JsonAt::Bool() const {
  SPK_RETURN_IF_ERROR(Expect(value_ != nullptr && value_->is_boolean(), "a boolean"));
  return value_->get<bool>();
}

Result<uint64_t> JsonAt::Count() const {
  SPK_RETURN_IF_ERROR(Expect(value_ != nullptr && value_->is_number(), "an integer >= 0"));
  if (value_->is_number_unsigned()) return value_->get<uint64_t>();
  if (value_->is_number_integer() && value_->get<int64_t>() >= 0) {
    return static_cast<uint64_t>(value_->get<int64_t>());
  }
  return Error("expected an integer >= 0, got " + value_->dump());
}

Status JsonAt::Object() const {
  return Expect(value_ != nullptr && value_->is_object(), "an object");
}

Result<size_t> JsonAt::Array() const {
  SPK_RETURN_IF_ERROR(Expect(value_ != nullptr && value_->is_array(), "an array"));
  return value_->size();
}

}  // namespace spk
