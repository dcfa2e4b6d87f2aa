// The model card's page structure: the YAML front matter Hugging Face reads (base_model,
// base_model_relation, library_name, pipeline_tag, tags, license) and the generated block between
// kGeneratedBegin and kGeneratedEnd (card.h). Merging into an existing card keeps the author's
// prose outside the markers and every front-matter key the card does not own.
//
// The tags name the scheme, the weights' number type (the scheme row's, never guessed from the
// scheme's name) and the draft method. The front matter is read as top-level `key: value` blocks
// (a key line and the indented or "- " lines under it), which is all a model card's front matter
// uses; values the card writes are quoted where YAML needs it. Ownership: values. Thread safety:
// pure functions. Error policy: cannot fail; an existing card without markers keeps its prose above
// a new generated block.
#pragma once

#include <string>

namespace spk::card {

struct OwnedKeys {
  std::string base_model;  // "" when unknown: the key is left out
  std::string license;     // "" when unknown: an existing card's license is kept
  std::string scheme;      // tags: the scheme's name
  std::string family;      // tags: the draft method ("llm" for a plain model)
  std::string
      number_type;  // tags: the weights' number type ("int4", "fp8", "nvfp4"; quant/scheme.h)
};

// The value of a top-level `key: value` line of `text`'s front matter ("" when absent), unquoted.
std::string FrontMatterScalar(const std::string& text, const std::string& key);

// The whole card: front matter (owned keys, then the existing card's other keys), the existing
// prose, and `generated` between the markers.
std::string MergeCard(const std::string& existing, const OwnedKeys& keys,
                      const std::string& generated);

}  // namespace spk::card
