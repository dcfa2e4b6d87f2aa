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

// Whether `needle` occurs in `text` (std::string_view::contains is C++23).
inline bool Contains(std::string_view text, std::string_view needle) {
  return text.find(needle) != std::string_view::npos;
}

// The last part of a dotted module or tensor name ("model.layers.0.mlp.down_proj" ->
// "down_proj"); the whole name when it has no dot.
inline std::string_view Leaf(std::string_view dotted) {
  size_t dot = dotted.rfind('.');
  return dot == std::string_view::npos ? dotted : dotted.substr(dot + 1);
}

// Everything before the last dot ("model.layers.0.mlp.down_proj" -> "model.layers.0.mlp"); empty
// when the name has no dot.
inline std::string_view Parent(std::string_view dotted) {
  size_t dot = dotted.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : dotted.substr(0, dot);
}

}  // namespace spk
