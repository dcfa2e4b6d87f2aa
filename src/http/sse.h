// Incremental parser for Server-Sent Events (text/event-stream), as streamed by OpenAI-compatible
// servers: frames of `data: {json}` lines ended by a blank line, `:` comment lines, `data: [DONE]`
// last.
//
// Bytes may be fed in pieces split anywhere (inside a line, between CR and LF, inside a multi-byte
// UTF-8 character): the parser keeps the unfinished line and only cuts at line ends, which are
// ASCII and so never fall inside a UTF-8 sequence. Each finished event is checked to be valid
// UTF-8. Ownership: the parser owns its buffer; events are returned by value. Thread safety: one
// parser per stream, not shared between threads. Error policy: no exceptions; a line longer than
// max_line_bytes makes Feed return InvalidInput (the stream is then unusable).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace spk::http {

struct SseEvent {
  std::string event;  // the `event:` field, "" when absent
  std::string data;   // `data:` lines joined with '\n'
  bool valid_utf8 = true;
};

class SseParser {
 public:
  explicit SseParser(size_t max_line_bytes = 16 << 20) : max_line_bytes_(max_line_bytes) {}

  // Consumes `bytes`, appending every event completed by them to *events.
  Status Feed(std::string_view bytes, std::vector<SseEvent>* events);

  // Ends the stream: an event whose blank line never came is dispatched (servers that close right
  // after the last data line). Returns the number of bytes that were still pending in an unfinished
  // line.
  size_t Finish(std::vector<SseEvent>* events);

 private:
  void ProcessLine(std::string_view line, std::vector<SseEvent>* events);
  void Dispatch(std::vector<SseEvent>* events);

  size_t max_line_bytes_;
  std::string line_;
  bool after_cr_ = false;  // the previous byte was CR: a following LF belongs to the same line end
  bool has_data_ = false;
  SseEvent pending_;
};

// True when `text` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
bool IsValidUtf8(std::string_view text);

// Length of the longest prefix of `text` that does not end inside a multi-byte UTF-8 character; the
// rest (at most 3 bytes) should be held back until more bytes arrive.
size_t CompleteUtf8Prefix(std::string_view text);

}  // namespace spk::http
