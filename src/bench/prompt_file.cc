#include "bench/prompt_file.h"

#include <fmt/format.h>

namespace spk::bench {
namespace {

using nlohmann::json;

// "role" a string, "content" a string or an array of content parts (OpenAI's multi-part form),
// nothing else checked: the server's chat template owns the rest.
std::optional<std::string> CheckMessages(const json& messages) {
  if (!messages.is_array() || messages.empty()) {
    return "\"messages\" must be a non-empty array of {\"role\", \"content\"} objects";
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    if (!m.is_object()) return fmt::format("\"messages\"[{}] must be an object", i);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return fmt::format("\"messages\"[{}].\"role\" must be a string", i);
    }
    auto content = m.find("content");
    if (content == m.end() || !(content->is_string() || content->is_array())) {
      return fmt::format("\"messages\"[{}].\"content\" must be a string or an array of parts", i);
    }
  }
  return std::nullopt;
}

// The problem with one line, or the prompt it holds.
Result<FilePrompt> ParseLine(std::string_view line, size_t number) {
  auto bad = [&](const std::string& what) { return Status::InvalidInput(what); };
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad("not valid JSON");
  if (!j.is_object()) return bad("not a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (key != "messages" && key != "prompt" && key != "max_tokens") {
      return bad(fmt::format("unknown field \"{}\" (known: messages, prompt, max_tokens)", key));
    }
  }
  bool has_messages = j.contains("messages"), has_prompt = j.contains("prompt");
  if (has_messages == has_prompt) {
    return bad(has_messages ? "has both \"messages\" and \"prompt\"; give one"
                            : "needs a \"messages\" or a \"prompt\" field");
  }
  FilePrompt prompt;
  prompt.line = number;
  prompt.chat = has_messages;
  if (has_messages) {
    if (auto problem = CheckMessages(j["messages"])) return bad(*problem);
    prompt.input = j["messages"];
  } else {
    const json& text = j["prompt"];
    if (!text.is_string() || text.get_ref<const std::string&>().empty()) {
      return bad("\"prompt\" must be a non-empty string");
    }
    prompt.input = text;
  }
  if (j.contains("max_tokens")) {
    const json& n = j["max_tokens"];
    if (!n.is_number_unsigned() || n.get<unsigned long long>() == 0) {
      return bad("\"max_tokens\" must be a positive integer");
    }
    prompt.max_tokens = n.get<size_t>();
  }
  return prompt;
}

}  // namespace

Result<std::vector<FilePrompt>> ParsePromptFile(std::string_view path, std::string_view text) {
  std::vector<FilePrompt> prompts;
  size_t number = 0;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    Result<FilePrompt> prompt = ParseLine(line, number);
    if (!prompt.ok()) {
      return Status::InvalidInput(
          fmt::format("--prompts {}:{}: {}", path, number, prompt.status().message()));
    }
    prompts.push_back(std::move(*prompt));
  }
  if (prompts.empty()) {
    return Status::InvalidInput(fmt::format(
        "--prompts {}: no prompts (one JSON object per line: {{\"messages\": [...]}} or "
        "{{\"prompt\": \"...\"}})",
        path));
  }
  return prompts;
}

Result<std::vector<FilePrompt>> ReadPromptFile(FileSystem* fs, const std::string& path) {
  Result<std::string> text = fs->ReadFile(path);
  if (!text.ok()) return text.status().WithContext("--prompts " + path);
  return ParsePromptFile(path, *text);
}

}  // namespace spk::bench
