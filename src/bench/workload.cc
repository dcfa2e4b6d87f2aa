#include "bench/workload.h"

#include <fmt/format.h>

#include <algorithm>

#include "http/sse.h"

namespace spk::bench {
namespace {

using nlohmann::json;

constexpr size_t kVariantStrideTokens = 61;  // prime, so variants do not align with the corpus
constexpr size_t kCharsPerTokenEstimate = 4;
constexpr size_t kProbeTokens = 16;  // the token-id probe's prompt length

bool IsCancelled(const Status& status) { return status.code() == StatusCode::kCancelled; }

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

// The server's tokenizer, reached with either the vLLM or the llama-server request shape.
class ServerTokenizer {
 public:
  ServerTokenizer(const http::Url& url, std::string model, const http::RequestOptions& options)
      : url_(url), model_(std::move(model)), options_(options) {}

  Result<std::vector<json>> Tokenize(const std::string& text) const {
    json vllm_body = {{"prompt", text}, {"add_special_tokens", false}};
    if (!model_.empty()) vllm_body["model"] = model_;
    Result<json> answer = PostForJson(url_, "/tokenize", vllm_body, options_);
    if (!answer.ok() && !IsCancelled(answer.status())) {
      answer =
          PostForJson(url_, "/tokenize", json{{"content", text}, {"add_special", false}}, options_);
    }
    if (!answer.ok()) return answer.status();
    if (!answer->contains("tokens") || !(*answer)["tokens"].is_array()) {
      return Status::Unavailable("/tokenize answered without a tokens array");
    }
    return (*answer)["tokens"].get<std::vector<json>>();
  }

  Result<std::string> Detokenize(const std::vector<json>& tokens) const {
    json body = {{"tokens", tokens}};
    if (!model_.empty()) body["model"] = model_;
    SPK_ASSIGN_OR_RETURN(json answer, PostForJson(url_, "/detokenize", body, options_));
    for (const char* key : {"prompt", "content"}) {
      if (answer.contains(key) && answer[key].is_string()) return answer[key].get<std::string>();
    }
    return Status::Unavailable("/detokenize answered without a prompt or content string");
  }

  // Whether /v1/completions takes a list of token ids as the prompt and counts exactly those.
  Result<bool> AcceptsTokenIds(const std::vector<json>& ids, std::string* why_not) const {
    json body = {{"prompt", ids}, {"max_tokens", 1}, {"temperature", 0}, {"stream", false}};
    if (!model_.empty()) body["model"] = model_;
    Result<json> answer = PostForJson(url_, "/v1/completions", body, options_);
    if (!answer.ok()) {
      if (IsCancelled(answer.status())) return answer.status();
      *why_not = "token ids as the prompt: " + answer.status().message();
      return false;
    }
    const json usage = answer->value("usage", json::object());
    if (!usage.is_object() || !usage.contains("prompt_tokens") ||
        !usage["prompt_tokens"].is_number_integer()) {
      *why_not = "token ids as the prompt: the answer has no usage.prompt_tokens to confirm them";
      return false;
    }
    if (usage["prompt_tokens"].get<size_t>() != ids.size()) {
      *why_not = fmt::format("token ids as the prompt: {} ids sent, usage.prompt_tokens = {}",
                             ids.size(), usage["prompt_tokens"].get<size_t>());
      return false;
    }
    return true;
  }

 private:
  http::Url url_;
  std::string model_;
  http::RequestOptions options_;
};

// Cuts `text` at about `chars` bytes from `offset` without splitting a UTF-8 character.
std::string CutChars(std::string_view text, size_t offset, size_t chars) {
  std::string_view piece = text.substr(std::min(offset, text.size()), chars);
  return std::string(piece.substr(0, http::CompleteUtf8Prefix(piece)));
}

// The first byte at or after `offset` that starts a UTF-8 character.
size_t CharacterStart(std::string_view text, size_t offset) {
  while (offset < text.size() && (static_cast<unsigned char>(text[offset]) & 0xC0) == 0x80) {
    ++offset;
  }
  return offset;
}

// The longest prefix of text[start..] with at most `length` tokens, found by bisection on the
// token count of prefixes (counts grow with the prefix, one /tokenize call a step).
Result<std::pair<std::string, size_t>> CutByBisection(const ServerTokenizer& tokenizer,
                                                      std::string_view text, size_t start,
                                                      size_t length) {
  auto count = [&](size_t end) -> Result<size_t> {
    SPK_ASSIGN_OR_RETURN(auto ids, tokenizer.Tokenize(CutChars(text, start, end - start)));
    return ids.size();
  };
  size_t lo = start, hi = std::min(text.size(), start + length * kCharsPerTokenEstimate);
  SPK_ASSIGN_OR_RETURN(size_t hi_count, count(hi));
  while (hi_count <= length && hi < text.size()) {  // grow until the prefix is too long
    lo = hi;
    hi = std::min(text.size(), start + 2 * (hi - start));
    SPK_ASSIGN_OR_RETURN(hi_count, count(hi));
  }
  if (hi_count <= length) lo = hi;  // the whole rest of the text is short enough
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    SPK_ASSIGN_OR_RETURN(size_t c, count(mid));
    (c <= length ? lo : hi) = mid;
  }
  std::string prompt = CutChars(text, start, lo - start);
  SPK_ASSIGN_OR_RETURN(auto ids, tokenizer.Tokenize(prompt));
  return std::make_pair(std::move(prompt), length - std::min(length, ids.size()));
}

std::string CorpusText(std::string_view corpus, size_t needed_tokens) {
  // Repeat the corpus when the longest prompt needs more text than it has.
  size_t copies = std::max<size_t>(1, (needed_tokens * kCharsPerTokenEstimate) / corpus.size() + 1);
  std::string text;
  for (size_t i = 0; i < copies; ++i) text.append(corpus);
  return text;
}

Status CutTokenSlices(const ServerTokenizer& tokenizer, const std::vector<json>& tokens,
                      const PromptRequest& request, bool as_ids, PromptSet* set) {
  for (size_t length : request.lengths) {
    for (size_t v = 0; v < request.variants; ++v) {
      auto begin = tokens.begin() + static_cast<std::ptrdiff_t>(v * kVariantStrideTokens);
      std::vector<json> slice(begin, begin + static_cast<std::ptrdiff_t>(length));
      if (as_ids) {
        set->prompts[length].push_back(json(slice));
        continue;
      }
      SPK_ASSIGN_OR_RETURN(std::string prompt, tokenizer.Detokenize(slice));
      set->prompts[length].push_back(std::move(prompt));
    }
  }
  return Status::Ok();
}

Status CutByEstimate(const std::string& text, const PromptRequest& request, PromptSet* set) {
  for (size_t length : request.lengths) {
    for (size_t v = 0; v < request.variants; ++v) {
      set->prompts[length].push_back(CutChars(text,
                                              v * kVariantStrideTokens * kCharsPerTokenEstimate,
                                              length * kCharsPerTokenEstimate));
    }
  }
  set->method = PromptMethod::kEstimate;
  set->exact = false;
  set->description =
      "WARNING: prompt lengths are ESTIMATED at 4 characters per token (the server has no usable "
      "/tokenize); see prompt_tokens per request for the real lengths";
  return Status::Ok();
}

Status CutWithTokenizeOnly(const ServerTokenizer& tokenizer, const std::string& text,
                           const PromptRequest& request, PromptSet* set) {
  set->prompts.clear();
  for (size_t length : request.lengths) {
    for (size_t v = 0; v < request.variants; ++v) {
      size_t start = CharacterStart(text, v * kVariantStrideTokens * kCharsPerTokenEstimate);
      SPK_ASSIGN_OR_RETURN(auto cut, CutByBisection(tokenizer, text, start, length));
      set->largest_length_error = std::max(set->largest_length_error, cut.second);
      set->prompts[length].push_back(std::move(cut.first));
    }
  }
  set->method = PromptMethod::kBisection;
  set->exact = set->largest_length_error == 0;
  set->description =
      fmt::format("cut by bisection on the server's /tokenize counts (no /detokenize); {}",
                  set->exact ? "every prompt has exactly its length"
                             : fmt::format("prompts are up to {} tokens short of their length",
                                           set->largest_length_error));
  return Status::Ok();
}

}  // namespace

const char* PromptMethodName(PromptMethod method) {
  static constexpr const char* kNames[] = {"token-ids", "tokenize+detokenize", "tokenize-bisection",
                                           "estimate"};
  return kNames[static_cast<int>(method)];
}

json PromptSet::ToJson() const {
  return {{"exact", exact},
          {"method", PromptMethodName(method)},
          {"description", description},
          {"degraded", degraded},
          {"largest_length_error_tokens", largest_length_error}};
}

Result<PromptSet> BuildPrompts(const http::Url& url, std::string_view corpus,
                               const PromptRequest& request, const http::RequestOptions& options) {
  size_t longest = request.lengths.empty()
                       ? 0
                       : *std::max_element(request.lengths.begin(), request.lengths.end());
  size_t needed_tokens = longest + request.variants * kVariantStrideTokens;
  std::string text = CorpusText(corpus, needed_tokens);
  ServerTokenizer tokenizer(url, request.model, options);

  PromptSet set;
  Result<std::vector<json>> tokens = tokenizer.Tokenize(text);
  if (!tokens.ok()) {
    if (IsCancelled(tokens.status())) return tokens.status();
    set.degraded.push_back("no usable /tokenize (" + tokens.status().message() +
                           "): prompt lengths are estimated");
    SPK_RETURN_IF_ERROR(CutByEstimate(text, request, &set));
    return set;
  }
  while (tokens->size() < needed_tokens) {  // the tokenizer packs more than estimated... rarely
    text.append(corpus);
    SPK_ASSIGN_OR_RETURN(tokens, tokenizer.Tokenize(text));
  }

  if (!request.chat) {
    std::string why_not;
    std::vector<json> probe(tokens->begin(), tokens->begin() + kProbeTokens);
    SPK_ASSIGN_OR_RETURN(bool ids_ok, tokenizer.AcceptsTokenIds(probe, &why_not));
    if (ids_ok) {
      SPK_RETURN_IF_ERROR(CutTokenSlices(tokenizer, *tokens, request, /*as_ids=*/true, &set));
      set.method = PromptMethod::kTokenIds;
      set.exact = true;
      set.description = "token ids cut from the server's /tokenize, sent as the prompt (exact)";
      return set;
    }
    set.degraded.push_back(why_not + "; text prompts instead");
  }

  Status detokenized = CutTokenSlices(tokenizer, *tokens, request, /*as_ids=*/false, &set);
  if (detokenized.ok()) {
    set.method = PromptMethod::kDetokenize;
    set.exact = true;
    set.description = "cut with the server's /tokenize and /detokenize";
    return set;
  }
  if (IsCancelled(detokenized)) return detokenized;
  set.degraded.push_back("no usable /detokenize (" + detokenized.message() +
                         "): text cut by bisection on /tokenize counts");
  SPK_RETURN_IF_ERROR(CutWithTokenizeOnly(tokenizer, text, request, &set));
  return set;
}

}  // namespace spk::bench
