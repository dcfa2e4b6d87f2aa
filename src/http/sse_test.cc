#include "http/sse.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/test_util.h"

namespace spk::http {
namespace {

std::vector<SseEvent> ParseInPieces(std::string_view stream, const std::vector<size_t>& cuts) {
  SseParser parser;
  std::vector<SseEvent> events;
  size_t start = 0;
  for (size_t cut : cuts) {
    EXPECT_TRUE(parser.Feed(stream.substr(start, cut - start), &events).ok());
    start = cut;
  }
  EXPECT_TRUE(parser.Feed(stream.substr(start), &events).ok());
  parser.Finish(&events);
  return events;
}

const std::string kStream =
    ": keep-alive\r\n"
    "data: {\"text\":\"caf\xC3\xA9 \xE2\x86\x92 \xF0\x9F\x98\x80\"}\r\n\r\n"
    "event: note\n"
    "data: line one\n"
    "data:line two\n\n"
    ": comment between frames\n\n"
    "data: [DONE]\n\n";

void ExpectStreamEvents(const std::vector<SseEvent>& events) {
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].data, "{\"text\":\"caf\xC3\xA9 \xE2\x86\x92 \xF0\x9F\x98\x80\"}");
  EXPECT_TRUE(events[0].valid_utf8);
  EXPECT_EQ(events[1].event, "note");
  EXPECT_EQ(events[1].data, "line one\nline two");
  EXPECT_EQ(events[2].data, "[DONE]");
}

TEST(SseParser, WholeStream) { ExpectStreamEvents(ParseInPieces(kStream, {})); }

TEST(SseParser, SplitAtEveryPosition) {
  for (size_t cut = 1; cut < kStream.size(); ++cut) {
    SCOPED_TRACE(cut);
    ExpectStreamEvents(ParseInPieces(kStream, {cut}));
  }
}

TEST(SseParser, SplitAtEveryPairOfPositions) {
  for (size_t a = 1; a < kStream.size(); a += 3) {
    for (size_t b = a; b < kStream.size(); b += 5)
      ExpectStreamEvents(ParseInPieces(kStream, {a, b}));
  }
}

TEST(SseParser, ByteAtATimeKeepsMultiByteCharactersWhole) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < kStream.size(); ++i) cuts.push_back(i);
  ExpectStreamEvents(ParseInPieces(kStream, cuts));
}

TEST(SseParser, CrLfSplitBetweenCrAndLfIsOneLineEnd) {
  // If CR and LF were taken as two line ends, the frame would be dispatched early, then an empty
  // line... and "data: b" would become a separate event.
  std::string stream = "data: a\r";
  std::vector<SseEvent> events;
  SseParser parser;
  ASSERT_TRUE(parser.Feed(stream, &events).ok());
  ASSERT_TRUE(parser.Feed("\ndata: b\r\n\r\n", &events).ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "a\nb");
}

TEST(SseParser, FinishDispatchesUnterminatedEvent) {
  SseParser parser;
  std::vector<SseEvent> events;
  ASSERT_TRUE(parser.Feed("data: tail", &events).ok());
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(parser.Finish(&events), 10u);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "tail");
}

TEST(SseParser, InvalidUtf8IsFlagged) {
  std::vector<SseEvent> events = ParseInPieces("data: \xC3\x28\n\n", {});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_FALSE(events[0].valid_utf8);
}

TEST(SseParser, OverlongLineIsAnError) {
  SseParser parser(8);
  std::vector<SseEvent> events;
  test_util::ExpectError(parser.Feed("data: 0123456789", &events), StatusCode::kInvalidInput,
                         "line longer than 8 bytes");
}

TEST(Utf8, Validation) {
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("\xE2\x86\x92"));
  EXPECT_FALSE(IsValidUtf8("\xE2\x86"));          // truncated
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
}

TEST(Utf8, CompletePrefixHoldsBackCutCharacter) {
  EXPECT_EQ(CompleteUtf8Prefix("ab"), 2u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xE2\x86"), 1u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xE2\x86\x92"), 4u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xF0\x9F\x98"), 1u);
  EXPECT_EQ(CompleteUtf8Prefix("\xC3"), 0u);
}

}  // namespace
}  // namespace spk::http
