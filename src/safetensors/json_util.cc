#include "safetensors/json_util.h"

#include <cstdio>
#include <set>
#include <vector>

namespace spk {
namespace {

std::string Hex2(unsigned char c) {
  char buffer[3];
  std::snprintf(buffer, sizeof buffer, "%02x", c);
  return buffer;
}

// Length of the UTF-8 sequence starting with `c` and the allowed range of its second byte (RFC 3629
// table 4), or 0 when `c` cannot start a sequence.
size_t SequenceLength(unsigned char c, unsigned char* lo, unsigned char* hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) {
    if (c == 0xE0) *lo = 0xA0;  // overlong 3-byte forms
    if (c == 0xED) *hi = 0x9F;  // UTF-16 surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (c == 0xF0) *lo = 0x90;  // overlong 4-byte forms
    if (c == 0xF4) *hi = 0x8F;  // above U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

std::optional<std::string> FindInvalidUtf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    unsigned char lo, hi;
    const size_t len = SequenceLength(p[i], &lo, &hi);
    const std::string where = " at byte " + std::to_string(i);
    if (len == 0) return "invalid UTF-8 byte 0x" + Hex2(p[i]) + where;
    if (i + len > n) return "truncated UTF-8 sequence" + where;
    bool ok = p[i + 1] >= lo && p[i + 1] <= hi;
    for (size_t k = 2; ok && k < len; ++k) ok = p[i + k] >= 0x80 && p[i + k] <= 0xBF;
    if (!ok) return "invalid UTF-8 sequence" + where;
    i += len;
  }
  return std::nullopt;
}

Result<nlohmann::ordered_json> ParseJsonStrict(std::string_view label, std::string_view text) {
  const std::string prefix = std::string(label) + ": ";
  // nlohmann skips a byte order mark; serde_json (and so the reference) rejects it.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") {
    return Status::InvalidInput(prefix + "JSON starts with a UTF-8 byte order mark; remove it");
  }
  // nlohmann stops at a NUL byte as if the input ended there, which would hide trailing garbage. A
  // raw NUL is never valid JSON (it must be escaped inside strings), so reject it up front.
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return Status::InvalidInput(prefix + "invalid JSON: NUL byte at position " +
                                std::to_string(nul));
  }
  // Keys seen in each open object, innermost last, to catch duplicates the DOM would merge.
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate;
  auto callback = [&](int /*depth*/, nlohmann::ordered_json::parse_event_t event,
                      nlohmann::ordered_json& parsed) {
    using Event = nlohmann::ordered_json::parse_event_t;
    if (event == Event::object_start) {
      open_objects.emplace_back();
    } else if (event == Event::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == Event::key && !open_objects.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second && !duplicate) duplicate = key;
    }
    return true;
  };
  try {
    nlohmann::ordered_json value =
        nlohmann::ordered_json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                                      /*ignore_comments=*/false);
    if (duplicate) {
      return Status::InvalidInput(prefix + "the key '" + *duplicate +
                                  "' appears twice in one JSON object; names must be unique");
    }
    return value;
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidInput(prefix + "invalid JSON: " + e.what());
  }
}

void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\r':
        out->append("\\r");
        break;
      default:
        if (c < 0x20) {
          out->append("\\u00").append(Hex2(c));
        } else {
          out->push_back(ch);
        }
    }
  }
  out->push_back('"');
}

}  // namespace spk
