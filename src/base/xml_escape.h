// Escaping text for XML and HTML (the SVG plots of `bench` and the HTML report of `compare`):
// &, <, > and " become entities, so any model, arm or tensor name is safe inside an element or a
// double-quoted attribute. Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace spk {

inline std::string EscapeXml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

}  // namespace spk
