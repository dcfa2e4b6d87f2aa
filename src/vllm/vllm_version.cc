#include "vllm/vllm_version.h"

#include <fmt/format.h>

#include <charconv>
#include <tuple>

namespace spk {
namespace {

// Reads "N" at `s[*pos]`; false when there is no digit there.
bool ReadNumber(std::string_view s, size_t* pos, int* out) {
  auto [ptr, ec] = std::from_chars(s.data() + *pos, s.data() + s.size(), *out);
  if (ec != std::errc()) return false;
  *pos = static_cast<size_t>(ptr - s.data());
  return true;
}

}  // namespace

std::string VllmVersion::release() const { return fmt::format("{}.{}.{}", major, minor, patch); }

Result<VllmVersion> ParseVllmVersion(std::string_view text) {
  VllmVersion v;
  v.text = std::string(text);
  std::string_view s = text;
  if (s.starts_with("v")) s.remove_prefix(1);
  size_t pos = 0;
  int* parts[] = {&v.major, &v.minor, &v.patch};
  int read = 0;
  for (int* part : parts) {
    if (read > 0) {
      if (pos >= s.size() || s[pos] != '.') break;
      ++pos;
    }
    if (!ReadNumber(s, &pos, part)) {
      if (read > 0) --pos;  // "0.32.dev1": the dot starts the suffix
      break;
    }
    ++read;
  }
  if (read < 2) {
    return Status::Usage(
        fmt::format("'{}' is not a vLLM version (use MAJOR.MINOR[.PATCH], e.g. 0.32.0)", text));
  }
  std::string_view rest = s.substr(pos);
  if (!rest.empty() && rest[0] == '.') rest.remove_prefix(1);
  // "+cpu" is a local build label of the same release; anything else (rc1, .dev5, a1) precedes it.
  v.prerelease = !rest.empty() && rest[0] != '+';
  return v;
}

int CompareVllmVersions(const VllmVersion& a, const VllmVersion& b) {
  auto key = [](const VllmVersion& v) {
    return std::make_tuple(v.major, v.minor, v.patch, v.prerelease ? 0 : 1);
  };
  return key(a) < key(b) ? -1 : key(b) < key(a) ? 1 : 0;
}

int CompareVllmReleases(const VllmVersion& a, const VllmVersion& b) {
  auto key = [](const VllmVersion& v) { return std::make_tuple(v.major, v.minor, v.patch); };
  return key(a) < key(b) ? -1 : key(b) < key(a) ? 1 : 0;
}

}  // namespace spk
