#include "http/sse.h"

namespace spk::http {
namespace {

// Number of bytes in the UTF-8 sequence started by `lead`, or 0 if `lead` cannot start one.
size_t SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

}  // namespace

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    auto lead = static_cast<unsigned char>(text[i]);
    size_t len = SequenceLength(lead);
    if (len == 0 || i + len > text.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    if (len >= 3) {
      auto second = static_cast<unsigned char>(text[i + 1]);
      if (lead == 0xE0 && second < 0xA0) return false;  // overlong
      if (lead == 0xED && second > 0x9F) return false;  // surrogate
      if (lead == 0xF0 && second < 0x90) return false;  // overlong
      if (lead == 0xF4 && second > 0x8F) return false;  // above U+10FFFF
    }
    i += len;
  }
  return true;
}

size_t CompleteUtf8Prefix(std::string_view text) {
  // Walk back over at most 3 continuation bytes to the last lead byte.
  size_t end = text.size();
  for (size_t back = 1; back <= 4 && back <= end; ++back) {
    auto byte = static_cast<unsigned char>(text[end - back]);
    if ((byte & 0xC0) == 0x80) continue;  // continuation byte
    size_t len = SequenceLength(byte);
    if (len > back) return end - back;  // the sequence is cut short
    return end;
  }
  return end;
}

Status SseParser::Feed(std::string_view bytes, std::vector<SseEvent>* events) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    char c = bytes[i];
    if (c == '\n' && after_cr_) {  // second half of CRLF
      after_cr_ = false;
      continue;
    }
    after_cr_ = false;
    if (c == '\r' || c == '\n') {
      after_cr_ = c == '\r';
      ProcessLine(line_, events);
      line_.clear();
      continue;
    }
    // Copy the run up to the next line end in one go.
    size_t end = bytes.find_first_of("\r\n", i);
    if (end == std::string_view::npos) end = bytes.size();
    line_.append(bytes.substr(i, end - i));
    i = end - 1;
    if (line_.size() > max_line_bytes_) {
      return Status::InvalidInput("server-sent event line longer than " +
                                  std::to_string(max_line_bytes_) + " bytes");
    }
  }
  return Status::Ok();
}

size_t SseParser::Finish(std::vector<SseEvent>* events) {
  size_t pending = line_.size();
  if (!line_.empty()) {
    ProcessLine(line_, events);
    line_.clear();
  }
  Dispatch(events);
  return pending;
}

void SseParser::ProcessLine(std::string_view line, std::vector<SseEvent>* events) {
  if (line.empty()) {
    Dispatch(events);
    return;
  }
  if (line.front() == ':') return;  // comment (keep-alive)
  size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) pending_.data.push_back('\n');
    pending_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    pending_.event = std::string(value);
  }
  // `id`, `retry` and unknown fields do not matter here.
}

void SseParser::Dispatch(std::vector<SseEvent>* events) {
  if (has_data_) {
    pending_.valid_utf8 = IsValidUtf8(pending_.data) && IsValidUtf8(pending_.event);
    events->push_back(std::move(pending_));
  }
  pending_ = SseEvent{};
  has_data_ = false;
}

}  // namespace spk::http
