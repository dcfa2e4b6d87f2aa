// The benchmark workload: a built-in code-continuation corpus, cut into prompts of an exact token
// length with whatever the server offers, most exact first:
//   1. token ids as the prompt (vLLM's /v1/completions takes a list of ids): the ids cut from
//      /tokenize are sent as they are, so the length is exact with no detokenize/retokenize drift;
//   2. /tokenize + /detokenize (chat requests, or a server that takes only text prompts);
//   3. /tokenize alone: the text is cut by bisection on the token count of its prefixes;
//   4. an estimate of 4 characters per token, said loudly (no usable /tokenize).
// A missing or different optional endpoint moves the run one step down this list and says how in
// PromptSet::degraded; it never ends the run.
//
// Several prompt variants per length start at different corpus offsets, so repeated requests do not
// all hit the server's prefix cache with one identical prompt; variant v is the same text for every
// arm. Ownership: values. Thread safety: functions are reentrant. Error policy: no exceptions;
// Status only for cancellation or a server that fails mid-way through a method it offered.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "http/http_client.h"

namespace spk::bench {

// The built-in corpus (source code shipped with sparkulator).
std::string_view BuiltinCorpus();

// How the prompts were cut; the JSON name of each is in PromptMethodName.
enum class PromptMethod { kTokenIds, kDetokenize, kBisection, kEstimate };  // kNames order
const char* PromptMethodName(PromptMethod method);

struct PromptSet {
  // prompts[length][variant]: a string, or an array of token ids (PromptMethod::kTokenIds)
  std::map<size_t, std::vector<nlohmann::json>> prompts;
  PromptMethod method = PromptMethod::kEstimate;
  bool exact = false;       // every prompt has exactly its cell's token count (server tokenizer)
  std::string description;  // how the prompts were cut, for the report
  std::vector<std::string> degraded;  // each optional endpoint that was missing, and what it cost
  size_t largest_length_error = 0;    // bisection: the largest |tokens - length| over the prompts

  nlohmann::json ToJson() const;
};

struct PromptRequest {
  std::string model;  // sent as "model" when not empty
  bool chat = false;  // chat prompts are text: token ids are not tried
  std::vector<size_t> lengths;
  size_t variants = 1;
};

// Builds `request.variants` prompts for every length.
Result<PromptSet> BuildPrompts(const http::Url& url, std::string_view corpus,
                               const PromptRequest& request, const http::RequestOptions& options);

}  // namespace spk::bench
