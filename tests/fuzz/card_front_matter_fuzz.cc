// libFuzzer target: updating a model card (`sparkulator card --update`) reads a README the user
// wrote, so the front-matter reader and the merge must never crash or read out of bounds, and the
// merged card must always carry the generated block once, between its markers.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "card/card.h"
#include "card/front_matter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string existing(reinterpret_cast<const char*>(data), size);
  (void)spk::card::FrontMatterScalar(existing, "license");
  spk::card::OwnedKeys keys{"org/model", "apache-2.0", "w4a16", "dflash", "int4"};
  const std::string generated = "GENERATED-BODY\n";
  std::string card = spk::card::MergeCard(existing, keys, generated);
  if (card.find(generated) == std::string::npos) std::abort();
  if (card.find(spk::card::kGeneratedEnd) == std::string::npos) std::abort();
  return 0;
}
