// Splitting text into lines, for the parsers of line-oriented text (vLLM's log, a model card's
// front matter): one loop, so that every caller treats a missing final newline the same way.
// Pure function over the caller's text: the views point into `text`, which must outlive them.
// Thread-safe.
#pragma once

#include <string_view>
#include <vector>

namespace spk {

// The lines of `text` without their '\n'; a final line without a newline is a line too, and an
// empty text has no lines. "\r" is kept (callers that care strip it).
inline std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

}  // namespace spk
