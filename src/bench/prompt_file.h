// `bench --prompts FILE`: the user's own prompts, one JSON object per line (JSONL), instead of the
// built-in code corpus and its prompt-length grid, for measuring a draft on the traffic it will
// see.
//
//   {"messages": [{"role": "system", "content": "..."}, {"role": "user", "content": "..."}]}
//       -> /v1/chat/completions, the messages verbatim (the server applies its chat template)
//   {"prompt": "text"}  -> /v1/completions
//   either may add "max_tokens": N (a positive integer) to override --max-tokens for that prompt.
// Blank lines are skipped (line numbers still count them). Anything else is refused, naming the
// file, the line and the field: text that is not JSON, a line that is not an object, one with
// neither or both of "messages" and "prompt", a field of the wrong type, an unknown field, an
// empty file. The whole file is checked before any server is reached.
//
// Ownership: values. Thread safety: pure functions. Error policy: no exceptions (nlohmann parses
// with exceptions off and every field's type is checked before it is read); InvalidInput (exit 2)
// for a malformed file, the FileSystem's status for one that cannot be read.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "io/file.h"

namespace spk::bench {

struct FilePrompt {
  size_t line = 0;       // 1-based line in the file
  bool chat = false;     // "messages": chat completions; "prompt": completions
  nlohmann::json input;  // chat: the messages array, verbatim; completions: the prompt string
  std::optional<size_t> max_tokens;  // the line's "max_tokens", when it has one
};

// Parses the text of a prompts file; `path` only labels the errors.
Result<std::vector<FilePrompt>> ParsePromptFile(std::string_view path, std::string_view text);

// Reads `path` through `fs` and parses it.
Result<std::vector<FilePrompt>> ReadPromptFile(FileSystem* fs, const std::string& path);

}  // namespace spk::bench
