// Small string helpers shared by every layer: header-only, pure functions, no errors.
#pragma once

#include <string>
#include <string_view>

namespace spk {

// Python's str.replace(old, new): every `from` in `text` replaced by `to`, left to right, never
// rescanning what was put in (vLLM builds shard names this way). An empty `from` changes nothing.
inline std::string ReplaceAll(std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(text);
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = text.find(from, pos)) != std::string_view::npos;
       pos = hit + from.size()) {
    out.append(text.substr(pos, hit - pos)).append(to);
  }
  return out.append(text.substr(pos));
}

}  // namespace spk
