// Checked reads of a parsed JSON document a user handed in (a `bench --json` results file, ...).
//
// nlohmann's get<T>() and at() throw on a wrong type or a missing key, and its const operator[]
// on a missing key is undefined behaviour; code that reads a file it did not write goes through
// JsonAt instead. A JsonAt is one place in the document: the file's name and the field path from
// the root ("arms[1].name"). Descending never fails (a missing key or index gives a JsonAt of
// nothing); the typed reads check, and their error names the file and the path:
//   "B.json: arms[1].name: expected a string, got a number".
//
// Ownership: a JsonAt points into the document it was made from, which must outlive it; it copies
// the file name and the path. Thread safety: const reads only. Error policy: no exceptions; a
// wrong type, a missing field or an out-of-range count is Status::InvalidInput.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace spk {

// `object[key]` when `object` is an object that has `key`, else null: for optional fields whose
// absence means "not measured". Never inserts and never reads out of bounds.
const nlohmann::json& FieldOrNull(const nlohmann::json& object, std::string_view key);

class JsonAt {
 public:
  // The whole document; `file` names it in every error.
  JsonAt(const nlohmann::json& root, std::string file);

  // The member `key` of an object, the element `index` of an array. Of anything else, or when
  // there is no such member or element: a JsonAt of nothing, whose reads say so (a parent of the
  // wrong type is reported by the parent's path: "arms: expected an array, got a string").
  JsonAt Key(std::string_view key) const;
  JsonAt Index(size_t index) const;

  bool missing() const { return value_ == nullptr; }
  bool null_or_missing() const { return value_ == nullptr || value_->is_null(); }

  Result<std::string> String() const;
  Result<double> Number() const;
  Result<bool> Bool() const;
  Result<uint64_t> Count() const;  // an integer >= 0
  // A number, or nullopt for null or a missing field.
  Result<std::optional<double>> NumberOrNull() const;
  // Present and of that kind; Array gives its size.
  Status Object() const;
  Result<size_t> Array() const;

  // "FILE: PATH: what" (or "FILE: what" at the root), for checks the reads above do not make.
  Status Error(std::string_view what) const;
  const std::string& path() const { return path_; }

 private:
  JsonAt(const nlohmann::json* value, const JsonAt& parent, std::string path);
  // The error of a read that expected `expected` ("a string"), or Ok when the value is there.
  Status Expect(bool ok, std::string_view expected) const;

  const nlohmann::json* value_;  // nullptr: nothing there
  std::string file_;
  std::string path_;
  std::optional<Status> parent_error_;  // set when an ancestor was of the wrong kind
};

}  // namespace spk
