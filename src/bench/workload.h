// The benchmark workload: a built-in code-continuation corpus, cut into prompts of an exact token
// length with the server's own tokenizer (POST /tokenize, then /detokenize) when it has one, else
// by an estimate of 4 characters per token (and the result says so).
//
// Several prompt variants per length start at different corpus offsets, so repeated requests do not
// all hit the server's prefix cache with one identical prompt; variant v is the same text for every
// arm. Ownership: values. Thread safety: functions are reentrant. Error policy: no exceptions;
// Status for a server that fails mid-way; a server WITHOUT /tokenize is not an error.
#pragma once

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

struct PromptSet {
  // prompts[length][variant]
  std::map<size_t, std::vector<std::string>> prompts;
  bool exact = false;  // cut with the server's tokenizer
  std::string method;  // how the prompts were cut, for the report
};

// Builds `variants` prompts for every length in `lengths`.
Result<PromptSet> BuildPrompts(const http::Url& url, const std::string& model,
                               std::string_view corpus, const std::vector<size_t>& lengths,
                               size_t variants, const http::RequestOptions& options);

}  // namespace spk::bench
