// JSON helpers shared by the safetensors header, the shard index and the writer: strict UTF-8
// validation, parsing that rejects duplicate object keys (nlohmann::json would silently keep one of
// them), and compact string escaping byte-identical to serde_json (the Rust safetensors writer).
// Pure functions, thread-safe. Errors are returned as a message string or Status; nothing throws.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace spk {

// nullopt when `text` is valid UTF-8 (no overlong forms, surrogates or code points above U+10FFFF,
// exactly what Rust's str::from_utf8 accepts); otherwise a description naming the byte offset.
std::optional<std::string> FindInvalidUtf8(std::string_view text);

// Parses `text` as one JSON value. Errors (InvalidInput, prefixed with `label`): syntax errors,
// trailing characters, a leading byte order mark, and any object holding the same key twice.
Result<nlohmann::ordered_json> ParseJsonStrict(std::string_view label, std::string_view text);

// Appends `s` as a JSON string literal the way serde_json writes it: '"' and '\\' escaped, control
// characters as \b \t \n \f \r or \u00xx (lowercase hex), everything else (including non-ASCII
// UTF-8) copied unchanged. REQUIRES: `s` is valid UTF-8.
void AppendJsonString(std::string* out, std::string_view s);

}  // namespace spk
