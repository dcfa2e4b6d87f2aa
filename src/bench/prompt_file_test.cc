#include "bench/prompt_file.h"

#include <gtest/gtest.h>

#include <string>

namespace spk::bench {
namespace {

std::string ErrorOf(std::string_view text) {
  auto parsed = ParsePromptFile("p.jsonl", text);
  EXPECT_FALSE(parsed.ok());
  if (parsed.ok()) return "";
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidInput);
  return parsed.status().message();
}

TEST(ParsePromptFile, ChatAndTextLinesInOrder) {
  auto parsed = ParsePromptFile("p.jsonl",
                                "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n"
                                "\n"
                                "{\"prompt\": \"def f():\", \"max_tokens\": 7}\r\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_TRUE((*parsed)[0].chat);
  EXPECT_EQ((*parsed)[0].line, 1u);
  EXPECT_EQ((*parsed)[0].input.dump(), R"([{"content":"hi","role":"user"}])");
  EXPECT_FALSE((*parsed)[0].max_tokens.has_value());
  EXPECT_FALSE((*parsed)[1].chat);
  EXPECT_EQ((*parsed)[1].line, 3u);  // the blank line still counts
  EXPECT_EQ((*parsed)[1].input, "def f():");
  EXPECT_EQ((*parsed)[1].max_tokens, 7u);
}

TEST(ParsePromptFile, EachMalformedLineNamesFileLineAndField) {
  EXPECT_EQ(ErrorOf("{\"prompt\": \"a\"}\n{oops\n"), "--prompts p.jsonl:2: not valid JSON");
  EXPECT_EQ(ErrorOf("[1, 2]"), "--prompts p.jsonl:1: not a JSON object");
  EXPECT_EQ(ErrorOf("{\"max_tokens\": 3}"),
            "--prompts p.jsonl:1: needs a \"messages\" or a \"prompt\" field");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"a\", \"messages\": []}"),
            "--prompts p.jsonl:1: has both \"messages\" and \"prompt\"; give one");
  EXPECT_EQ(ErrorOf("{\"prompt\": 5}"),
            "--prompts p.jsonl:1: \"prompt\" must be a non-empty string");
  EXPECT_EQ(ErrorOf("{\"messages\": \"hi\"}"),
            "--prompts p.jsonl:1: \"messages\" must be a non-empty array of {\"role\", "
            "\"content\"} objects");
  EXPECT_EQ(ErrorOf("{\"messages\": [{\"role\": \"user\", \"content\": 1}]}"),
            "--prompts p.jsonl:1: \"messages\"[0].\"content\" must be a string or an array of "
            "parts");
  EXPECT_EQ(ErrorOf("{\"messages\": [{\"content\": \"x\"}]}"),
            "--prompts p.jsonl:1: \"messages\"[0].\"role\" must be a string");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"a\", \"max_tokens\": -1}"),
            "--prompts p.jsonl:1: \"max_tokens\" must be a positive integer");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"a\", \"max_tokens\": 2.5}"),
            "--prompts p.jsonl:1: \"max_tokens\" must be a positive integer");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"a\", \"max_token\": 2}"),
            "--prompts p.jsonl:1: unknown field \"max_token\" (known: messages, prompt, "
            "max_tokens)");
  EXPECT_EQ(ErrorOf("\n  \n"),
            "--prompts p.jsonl: no prompts (one JSON object per line: {\"messages\": [...]} or "
            "{\"prompt\": \"...\"})");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"\xff\"}"), "--prompts p.jsonl:1: not valid JSON");
}

}  // namespace
}  // namespace spk::bench
