#include "bench/workload.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "http/sse.h"

namespace spk::bench {
namespace {

using nlohmann::json;

constexpr size_t kVariantStrideTokens =
    61;  // prime, so variants do not align with corpus structure
constexpr size_t kCharsPerTokenEstimate = 4;

Result<json> PostForJson(const http::Url& url, std::string_view path, const json& body,
                         const http::RequestOptions& options) {
  SPK_ASSIGN_OR_RETURN(http::Response response, http::PostJson(url, path, body.dump(), options));
  if (response.status != 200) {
    return Status::Unavailable(std::string(path) + " answered HTTP " +
                               std::to_string(response.status));
  }
  json parsed = json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded())
    return Status::Unavailable(std::string(path) + " answered invalid JSON");
  return parsed;
}

// Token ids of `text`, with either the vLLM or the llama-server request shape.
Result<std::vector<json>> Tokenize(const http::Url& url, const std::string& model,
                                   const std::string& text, const http::RequestOptions& options) {
  json vllm_body = {{"prompt", text}, {"add_special_tokens", false}};
  if (!model.empty()) vllm_body["model"] = model;
  Result<json> answer = PostForJson(url, "/tokenize", vllm_body, options);
  if (!answer.ok() && answer.status().code() != StatusCode::kCancelled) {
    answer =
        PostForJson(url, "/tokenize", json{{"content", text}, {"add_special", false}}, options);
  }
  if (!answer.ok()) return answer.status();
  if (!answer->contains("tokens") || !(*answer)["tokens"].is_array()) {
    return Status::Unavailable("/tokenize answered without a tokens array");
  }
  return (*answer)["tokens"].get<std::vector<json>>();
}

Result<std::string> Detokenize(const http::Url& url, const std::string& model,
                               const std::vector<json>& tokens,
                               const http::RequestOptions& options) {
  json body = {{"tokens", tokens}};
  if (!model.empty()) body["model"] = model;
  SPK_ASSIGN_OR_RETURN(json answer, PostForJson(url, "/detokenize", body, options));
  for (const char* key : {"prompt", "content"}) {
    if (answer.contains(key) && answer[key].is_string()) return answer[key].get<std::string>();
  }
  return Status::Unavailable("/detokenize answered without a prompt or content string");
}

// Cuts `text` at about `chars` bytes without splitting a UTF-8 character.
std::string CutChars(std::string_view text, size_t offset, size_t chars) {
  std::string_view piece = text.substr(offset, chars);
  return std::string(piece.substr(0, http::CompleteUtf8Prefix(piece)));
}

}  // namespace

Result<PromptSet> BuildPrompts(const http::Url& url, const std::string& model,
                               std::string_view corpus, const std::vector<size_t>& lengths,
                               size_t variants, const http::RequestOptions& options) {
  size_t longest = lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
  size_t needed_tokens = longest + variants * kVariantStrideTokens;
  // Repeat the corpus when the longest prompt needs more text than it has.
  size_t copies = std::max<size_t>(1, (needed_tokens * kCharsPerTokenEstimate) / corpus.size() + 1);
  std::string text;
  for (size_t i = 0; i < copies; ++i) text.append(corpus);

  PromptSet set;
  Result<std::vector<json>> tokens = Tokenize(url, model, text, options);
  if (tokens.ok()) {
    while (tokens->size() <
           needed_tokens) {  // the tokenizer packs more than estimated... rarely less
      text.append(corpus);
      SPK_ASSIGN_OR_RETURN(tokens, Tokenize(url, model, text, options));
    }
    for (size_t length : lengths) {
      for (size_t v = 0; v < variants; ++v) {
        auto begin = tokens->begin() + static_cast<std::ptrdiff_t>(v * kVariantStrideTokens);
        std::vector<json> slice(begin, begin + static_cast<std::ptrdiff_t>(length));
        SPK_ASSIGN_OR_RETURN(std::string prompt, Detokenize(url, model, slice, options));
        set.prompts[length].push_back(std::move(prompt));
      }
    }
    set.exact = true;
    set.method = "cut with the server's /tokenize and /detokenize";
    return set;
  }
  if (tokens.status().code() == StatusCode::kCancelled) return tokens.status();
  for (size_t length : lengths) {
    for (size_t v = 0; v < variants; ++v) {
      set.prompts[length].push_back(CutChars(text,
                                             v * kVariantStrideTokens * kCharsPerTokenEstimate,
                                             length * kCharsPerTokenEstimate));
    }
  }
  set.exact = false;
  set.method = "ESTIMATED at 4 characters per token (the server has no usable /tokenize: " +
               tokens.status().message() + "); see prompt_tokens per request for the real lengths";
  return set;
}

}  // namespace spk::bench
